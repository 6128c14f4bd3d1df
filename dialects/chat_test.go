package dialects

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func chatPtr[T any](v T) *T { return &v }

func TestParseChatRequest(t *testing.T) {
	tests := []struct {
		name string
		body string
		want Request
	}{
		{
			name: "string content and sampling",
			body: `{"model":"gpt-x","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],
				"temperature":0.5,"top_p":0.9,"max_tokens":100,"seed":7,"stream":true,"unknown":{"a":1}}`,
			want: Request{
				Model: "gpt-x",
				Messages: []Message{
					{Role: RoleSystem, Content: []Part{{Type: PartText, Text: "be brief"}}},
					{Role: RoleUser, Content: []Part{{Type: PartText, Text: "hi"}}},
				},
				Sampling: Sampling{Temperature: chatPtr(0.5), TopP: chatPtr(0.9), MaxTokens: chatPtr(100), Seed: chatPtr(int64(7))},
				Stream:   true,
			},
		},
		{
			name: "array content with image and unknown part",
			body: `{"model":"m","messages":[{"role":"user","name":"ann","content":[
				{"type":"text","text":"what is"},
				{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}},
				{"type":"input_audio","input_audio":{"data":"x","format":"wav"}}]}],
				"max_completion_tokens":64}`,
			want: Request{
				Model: "m",
				Messages: []Message{{Role: RoleUser, Name: "ann", Content: []Part{
					{Type: PartText, Text: "what is"},
					{Type: PartImage, ImageURL: "data:image/png;base64,AAAA"},
				}}},
				Sampling: Sampling{MaxTokens: chatPtr(64)},
			},
		},
		{
			name: "tools, tool calls and tool results",
			body: `{"model":"m","tools":[{"type":"function","function":{"name":"add","description":"adds","parameters":{"type":"object"}}}],
				"messages":[
				{"role":"user","content":"1+2"},
				{"role":"assistant","content":null,"reasoning_content":"think","tool_calls":[{"id":"c1","type":"function","function":{"name":"add","arguments":"{\"a\":1,\"b\":2}"}}]},
				{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"3"}]}]}`,
			want: Request{
				Model: "m",
				Tools: []Tool{{Name: "add", Description: "adds", Parameters: json.RawMessage(`{"type":"object"}`)}},
				Messages: []Message{
					{Role: RoleUser, Content: []Part{{Type: PartText, Text: "1+2"}}},
					{Role: RoleAssistant, Reasoning: "think", ToolCalls: []ToolCall{{ID: "c1", Name: "add", Arguments: `{"a":1,"b":2}`}}},
					{Role: RoleTool, ToolCallID: "c1", Content: []Part{{Type: PartText, Text: "3"}}},
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseChatRequest([]byte(tt.body))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got, "ParseChatRequest(%q)", tt.body)
		})
	}
}

func TestParseChatRequestRejects(t *testing.T) {
	for _, body := range []string{`not json`, `{"messages":[{"role":"user","content":42}]}`} {
		_, err := ParseChatRequest([]byte(body))
		assert.Error(t, err, "ParseChatRequest(%q) = nil error, want one", body)
	}
}

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

func TestUnquote(t *testing.T) {
	tests := []struct{ raw, want string }{
		{`""`, ""},
		{`"plain text"`, "plain text"},
		{`"tab\tand \"quote\""`, "tab\tand \"quote\""},
		{`"\u00e9t\u00e9"`, "été"},
		{`"été"`, "été"},
		{"\"bad \xff utf8\"", "bad \uFFFD utf8"},
	}
	for _, tt := range tests {
		got, err := unquote([]byte(tt.raw))
		require.NoError(t, err, "unquote(%q)", tt.raw)
		assert.Equal(t, tt.want, got, "unquote(%q)", tt.raw)
	}
}
