package dialects

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

func (chatDialect) ParseError(status int, body []byte) error { return ParseChatError(status, body) }

func (chatDialect) WriteError(w http.ResponseWriter, status int, code, message string) {
	WriteChatError(w, status, errorType(status, false), code, message)
}

func (chatDialect) StreamError(message string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": message, "type": ErrorTypeServer, "param": nil, "code": nil,
	}})
	return append(append([]byte("data: "), b...), "\n\n"...)
}

// Error types OpenAI uses in its error shape.
const (
	ErrorTypeInvalidRequest = "invalid_request_error"
	ErrorTypeServer         = "server_error"
)

// ChatError is an error in OpenAI's shape, {"error":{"message","type","code"}},
// as an upstream or the interception server returns it.
type ChatError struct {
	// Status is the HTTP status it came with; 0 inside a stream.
	Status  int
	Message string
	Type    string
	Code    string
}

// Error implements error.
func (e *ChatError) Error() string {
	var b bytes.Buffer
	if e.Status != 0 {
		fmt.Fprintf(&b, "status %d: ", e.Status)
	}
	if e.Type != "" {
		b.WriteString(e.Type)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	if e.Code != "" {
		fmt.Fprintf(&b, " (%s)", e.Code)
	}
	return b.String()
}

// ParseChatError reads an error body. A body not in OpenAI's shape becomes
// the message, cut to a bounded length.
func ParseChatError(status int, body []byte) *ChatError {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	e := &ChatError{Status: status}
	if json.Unmarshal(body, &env) == nil && len(env.Error) > 0 {
		var obj struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		}
		var s string
		switch {
		case json.Unmarshal(env.Error, &obj) == nil:
			e.Message, e.Type = obj.Message, obj.Type
			e.Code = jsonScalarText(obj.Code)
			return e
		case json.Unmarshal(env.Error, &s) == nil:
			e.Message = s
			return e
		}
	}
	e.Message = truncateText(string(bytes.TrimSpace(body)), maxErrorText)
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	return e
}

// WriteChatError writes an error in OpenAI's shape. An empty code is sent as null.
func WriteChatError(w http.ResponseWriter, status int, errType, code, message string) {
	var c any
	if code != "" {
		c = code
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": message,
		"type":    errType,
		"param":   nil,
		"code":    c,
	}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
