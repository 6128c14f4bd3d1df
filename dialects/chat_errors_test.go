package dialects

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseChatError(t *testing.T) {
	tests := []struct {
		body string
		want ChatError
	}{
		{`{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limit_exceeded","param":null}}`,
			ChatError{Status: 429, Message: "slow down", Type: "rate_limit_error", Code: "rate_limit_exceeded"}},
		{`{"error":{"message":"bad","type":"x","code":400}}`, ChatError{Status: 429, Message: "bad", Type: "x", Code: "400"}},
		{`{"error":"plain"}`, ChatError{Status: 429, Message: "plain"}},
		{`upstream exploded`, ChatError{Status: 429, Message: "upstream exploded"}},
		{``, ChatError{Status: 429, Message: "Too Many Requests"}},
	}
	for _, tt := range tests {
		got := ParseChatError(429, []byte(tt.body))
		assert.Equal(t, tt.want, *got, "ParseChatError(%q)", tt.body)
	}
}

func TestWriteChatError(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteChatError(rec, 401, ErrorTypeInvalidRequest, "invalid_api_key", "Incorrect API key provided.")
	assert.Equal(t, 401, rec.Code)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	assert.JSONEq(t, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, rec.Body.String())
	got := ParseChatError(rec.Code, rec.Body.Bytes())
	assert.Equal(t, &ChatError{Status: 401, Message: "Incorrect API key provided.", Type: ErrorTypeInvalidRequest, Code: "invalid_api_key"}, got)
}
