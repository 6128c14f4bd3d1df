package dialects

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

// ParseError reads an error body in Anthropic's shape; another body becomes
// the message, cut to a bounded length.
func (anthropicDialect) ParseError(status int, body []byte) error {
	var env struct {
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if jsonwire.Unmarshal(body, &env) == nil && env.Error != nil {
		return &AnthropicError{Status: status, Type: env.Error.Type, Message: env.Error.Message}
	}
	msg := truncateText(string(bytes.TrimSpace(body)), maxErrorText)
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &AnthropicError{Status: status, Message: msg}
}

func (anthropicDialect) WriteError(w http.ResponseWriter, status int, _, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(anthropicErrorBody(status, message))
}

func (anthropicDialect) StreamError(message string) []byte {
	return []byte("event: error\ndata: " + string(anthropicErrorBody(http.StatusInternalServerError, message)) + "\n\n")
}

// AnthropicError is an error in Anthropic's shape,
// {"type":"error","error":{"type","message"}}.
type AnthropicError struct {
	// Status is the HTTP status it came with; 0 inside a stream.
	Status  int
	Type    string
	Message string
}

// Error implements error.
func (e *AnthropicError) Error() string {
	var b strings.Builder
	if e.Status != 0 {
		fmt.Fprintf(&b, "status %d: ", e.Status)
	}
	if e.Type != "" {
		b.WriteString(e.Type + ": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

func anthropicErrorBody(status int, message string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{
		"type": errorType(status, true), "message": message,
	}})
	return b
}
