package dialects

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseChatResponse(t *testing.T) {
	tests := []struct {
		name string
		body string
		want Response
	}{
		{
			name: "content and usage",
			body: `{"id":"c-1","object":"chat.completion","model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],
				"usage":{"prompt_tokens":5,"completion_tokens":2,"completion_tokens_details":{"reasoning_tokens":1}},"system_fingerprint":"fp"}`,
			want: Response{
				ID: "c-1", Model: "gpt-x", FinishReason: "stop",
				Message: Message{Role: RoleAssistant, Content: []Part{{Type: PartText, Text: "hello"}}},
				Usage:   Usage{InputTokens: 5, OutputTokens: 2, ReasoningTokens: 1},
			},
		},
		{
			name: "tool calls and reasoning",
			body: `{"id":"c-2","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"reasoning":"hmm",
				"tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"t2","type":"function","function":{"name":"g","arguments":"{\"x\":1}"}}]},"finish_reason":"tool_calls"}]}`,
			want: Response{
				ID: "c-2", Model: "m", FinishReason: "tool_calls",
				Message: Message{Role: RoleAssistant, Reasoning: "hmm", ToolCalls: []ToolCall{
					{ID: "t1", Name: "f", Arguments: "{}"},
					{ID: "t2", Name: "g", Arguments: `{"x":1}`},
				}},
			},
		},
		{
			name: "refusal and second choice ignored",
			body: `{"id":"c-3","model":"m","choices":[{"index":1,"message":{"role":"assistant","content":"other"},"finish_reason":"stop"},
				{"index":0,"message":{"role":"assistant","content":null,"refusal":"no"},"finish_reason":"stop"}]}`,
			want: Response{
				ID: "c-3", Model: "m", FinishReason: "stop",
				Message: Message{Role: RoleAssistant, Refusal: "no"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseChatResponse([]byte(tt.body))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got, "ParseChatResponse(%q)", tt.body)
		})
	}
}
