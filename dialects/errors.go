package dialects

import (
	"errors"
	"net/http"
	"unicode/utf8"
)

// ErrorCode is what a caller is told of an upstream's error of any
// dialect: its machine-readable code (OpenAI's code, Anthropic's error
// type, Google's status) and its message. An error of neither shape has no code, and its
// text is the message.
func ErrorCode(err error) (code, message string) {
	var ce *ChatError
	if errors.As(err, &ce) {
		return ce.Code, ce.Message
	}
	var ae *AnthropicError
	if errors.As(err, &ae) {
		return ae.Type, ae.Message
	}
	var ge *GeminiError
	if errors.As(err, &ge) {
		return ge.Reason, ge.Message
	}
	return "", err.Error()
}

// errorType is the error type both families use for a status.
func errorType(status int, anthropic bool) string {
	switch {
	case status == http.StatusUnauthorized:
		if anthropic {
			return "authentication_error"
		}
		return ErrorTypeInvalidRequest
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound && anthropic:
		return "not_found_error"
	case status == http.StatusRequestEntityTooLarge && anthropic:
		return "request_too_large"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == 529:
		return "overloaded_error"
	case status >= 500:
		if anthropic {
			return "api_error"
		}
		return ErrorTypeServer
	}
	return ErrorTypeInvalidRequest
}

// maxErrorText bounds how much of a body that is not in OpenAI's shape becomes
// an error message.
const maxErrorText = 512

// truncateText cuts s to its first n bytes, on a rune boundary, marking the cut.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
