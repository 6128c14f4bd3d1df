package dialects

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChatStream(t *testing.T) {
	events := []string{
		`{"id":"s1","model":"m","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"let me "}}]}`,
		`{"id":"s1","model":"m","choices":[{"index":0,"delta":{"reasoning_content":"see"}}]}`,
		`{"id":"s1","model":"m","choices":[{"index":0,"delta":{"content":"Calling"}}]}`,
		`{"id":"s1","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"add","arguments":""}}]}}]}`,
		`{"id":"s1","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"mul","arguments":"{\"x\""}}]}}]}`,
		`{"id":"s1","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]}}]}`,
		`{"id":"s1","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]}`,
		`{"id":"s1","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":":2}"}}]}}]}`,
		`{"id":"s1","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"id":"s1","model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4}}`,
		`[DONE]`,
	}
	var s ChatStream
	for _, ev := range events {
		require.NoError(t, s.Add([]byte(ev)), "Add(%q)", ev)
	}
	want := Response{
		ID: "s1", Model: "m", FinishReason: "tool_calls",
		Message: Message{
			Role: RoleAssistant, Reasoning: "let me see",
			Content: []Part{{Type: PartText, Text: "Calling"}},
			ToolCalls: []ToolCall{
				{ID: "call_a", Name: "add", Arguments: `{"a":1}`},
				{ID: "call_b", Name: "mul", Arguments: `{"x":2}`},
			},
		},
		Usage: Usage{InputTokens: 9, OutputTokens: 4},
	}
	assert.True(t, s.Done(), "Done() after [DONE] = false")
	assert.Equal(t, want, s.Response())
}

func TestChatStreamError(t *testing.T) {
	var s ChatStream
	err := s.Add([]byte(`{"error":{"message":"overloaded","type":"server_error","code":"busy"}}`))
	var ce *ChatError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "overloaded", ce.Message)
	assert.Equal(t, "busy", ce.Code)
	assert.False(t, s.Done())
}
