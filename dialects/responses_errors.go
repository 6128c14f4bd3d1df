package dialects

import (
	"encoding/json"
	"net/http"
)

// The Responses API answers errors in chat's shape, but reports an error
// inside a stream as an error event of its own.

func (responsesDialect) ParseError(status int, body []byte) error {
	return ParseChatError(status, body)
}

func (responsesDialect) WriteError(w http.ResponseWriter, status int, code, message string) {
	chatDialect{}.WriteError(w, status, code, message)
}

func (responsesDialect) StreamError(message string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "error", "code": ErrorTypeServer, "message": message, "param": nil, "sequence_number": 0})
	return []byte("event: error\ndata: " + string(b) + "\n\n")
}
