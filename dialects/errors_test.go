package dialects_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/evalflow/evalflow/dialects"
)

func TestErrorCode(t *testing.T) {
	tests := []struct {
		err               error
		wantCode, wantMsg string
	}{
		{&dialects.ChatError{Status: 400, Type: "invalid_request_error", Code: "context_length_exceeded", Message: "too long"},
			"context_length_exceeded", "too long"},
		{fmt.Errorf("upstream: %w", &dialects.AnthropicError{Status: 429, Type: "rate_limit_error", Message: "slow down"}),
			"rate_limit_error", "slow down"},
		{dialects.Anthropic.ParseError(500, []byte("gateway exploded")), "", "gateway exploded"},
		{errors.New("plain"), "", "plain"},
	}
	for _, tt := range tests {
		code, msg := dialects.ErrorCode(tt.err)
		assert.Equal(t, tt.wantCode, code, "ErrorCode(%v) code", tt.err)
		assert.Equal(t, tt.wantMsg, msg, "ErrorCode(%v) message", tt.err)
	}
}
