package dialects

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

// GeminiError is an error in Google's shape,
// {"error":{"code","message","status"}}.
type GeminiError struct {
	// Status is the HTTP status it came with; 0 inside a stream.
	Status int
	// Code is the error's own code, an HTTP status.
	Code int
	// Reason is Google's status: INVALID_ARGUMENT, RESOURCE_EXHAUSTED, …
	Reason  string
	Message string
}

// Error implements error.
func (e *GeminiError) Error() string {
	s := e.Message
	if e.Reason != "" {
		s = e.Reason + ": " + s
	}
	if st := max(e.Status, e.Code); st != 0 {
		s = fmt.Sprintf("status %d: %s", st, s)
	}
	return s
}

// geminiStatus is the error object of Google's APIs.
type geminiStatus struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Status  string          `json:"status"`
	Details json.RawMessage `json:"details,omitempty"`
}

// ParseError reads an error body in Google's shape (also as the one
// element of an array, as streamGenerateContent without alt=sse sends
// it); another body becomes the message, cut to a bounded length.
func (geminiDialect) ParseError(status int, body []byte) error {
	var env struct {
		Error *geminiStatus `json:"error"`
	}
	trimmed := bytes.TrimSpace(body)
	if bytes.HasPrefix(trimmed, []byte("[")) {
		var arr []json.RawMessage
		if jsonwire.Unmarshal(trimmed, &arr) == nil && len(arr) == 1 {
			trimmed = arr[0]
		}
	}
	if jsonwire.Unmarshal(trimmed, &env) == nil && env.Error != nil {
		e := env.Error
		return &GeminiError{Status: status, Code: e.Code, Reason: orDefault(e.Status, geminiReasonOf(e.Code)), Message: e.Message}
	}
	msg := truncateText(string(trimmed), maxErrorText)
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &GeminiError{Status: status, Reason: geminiReasonOf(status), Message: msg}
}

func (geminiDialect) WriteError(w http.ResponseWriter, status int, _, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(geminiErrorBody(status, message))
}

// StreamError is an SSE event holding the error object, as Gemini ends a
// failed stream.
func (geminiDialect) StreamError(message string) []byte {
	return []byte("data: " + string(geminiErrorBody(http.StatusInternalServerError, message)) + "\n\n")
}

func geminiErrorBody(status int, message string) []byte {
	return mustJSON(map[string]any{"error": geminiStatus{Code: status, Message: message, Status: geminiReasonOf(status)}})
}

// geminiReasons are Google's statuses by HTTP status.
var geminiReasons = map[int]string{
	http.StatusBadRequest:          "INVALID_ARGUMENT",
	http.StatusUnauthorized:        "UNAUTHENTICATED",
	http.StatusForbidden:           "PERMISSION_DENIED",
	http.StatusNotFound:            "NOT_FOUND",
	http.StatusConflict:            "ABORTED",
	http.StatusRequestTimeout:      "DEADLINE_EXCEEDED",
	http.StatusTooManyRequests:     "RESOURCE_EXHAUSTED",
	499:                            "CANCELLED",
	http.StatusInternalServerError: "INTERNAL",
	http.StatusNotImplemented:      "UNIMPLEMENTED",
	http.StatusServiceUnavailable:  "UNAVAILABLE",
	http.StatusGatewayTimeout:      "DEADLINE_EXCEEDED",
}

// geminiReasonOf is Google's status for an HTTP status.
func geminiReasonOf(status int) string {
	if r, ok := geminiReasons[status]; ok {
		return r
	}
	switch {
	case status == 529:
		return "UNAVAILABLE"
	case status >= 500:
		return "INTERNAL"
	case status == 413:
		return "INVALID_ARGUMENT"
	case status >= 400:
		return "FAILED_PRECONDITION"
	}
	return "UNKNOWN"
}

// GeminiHTTPStatus is the HTTP status of Google's status reason:
// INVALID_ARGUMENT 400, RESOURCE_EXHAUSTED 429, UNAVAILABLE 503, …; 500
// for one it does not know.
func GeminiHTTPStatus(reason string) int {
	switch reason {
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return http.StatusBadRequest
	case "DEADLINE_EXCEEDED":
		return http.StatusGatewayTimeout
	case "ALREADY_EXISTS":
		return http.StatusConflict
	}
	for status, r := range geminiReasons {
		if r == reason && status != http.StatusRequestTimeout {
			return status
		}
	}
	return http.StatusInternalServerError
}
