package dialects

import (
	"encoding/json"
	"fmt"
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
				Model: "gpt-x", From: NameChat,
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
				Model: "m", From: NameChat,
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
				Model: "m", From: NameChat,
				Tools: []Tool{{Name: "add", Description: "adds", Parameters: json.RawMessage(`{"type":"object"}`)}},
				Messages: []Message{
					{Role: RoleUser, Content: []Part{{Type: PartText, Text: "1+2"}}},
					{Role: RoleAssistant, Reasoning: "think", ToolCalls: []ToolCall{{ID: "c1", Name: "add", Arguments: `{"a":1,"b":2}`}}},
					{Role: RoleTool, ToolCallID: "c1", Content: []Part{{Type: PartText, Text: "3"}}},
				},
			},
		},
		{
			name: "settings besides the messages",
			body: `{"model":"m","messages":[],"response_format":{"type":"json_schema","json_schema":{"name":"answer","strict":true,"schema":{"type":"object"}}},
				"n":2,"logprobs":true,"top_logprobs":3,"user":"u-1","metadata":{"run":"r1"},"service_tier":"flex","stream":true,"stream_options":{"include_usage":true}}`,
			want: Request{
				Model: "m", From: NameChat, Stream: true, StreamUsage: true,
				Format: &Format{Type: FormatJSONSchema, Name: "answer", Strict: chatPtr(true), Schema: json.RawMessage(`{"type":"object"}`)},
				N:      2, Logprobs: true, TopLogprobs: chatPtr(3), User: "u-1", Metadata: json.RawMessage(`{"run":"r1"}`), ServiceTier: "flex",
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

func TestOverlayChat(t *testing.T) {
	full := Sampling{Temperature: chatPtr(0.25), TopP: chatPtr(1.0), MaxTokens: chatPtr(512), Seed: chatPtr(int64(42))}
	tests := []struct {
		name  string
		body  string
		model string
		s     Sampling
		want  string
	}{
		{
			name:  "replaces in place, keeps unknown fields and spacing",
			body:  `{"model": "caller-model", "messages":[{"role":"user","content":"hi","x_extra":true}], "temperature": 1.5, "x_vendor": {"k": [1, 2]}, "max_tokens":10, "seed":1}`,
			model: "run-model",
			s:     full,
			want:  `{"model": "run-model", "messages":[{"role":"user","content":"hi","x_extra":true}], "temperature": 0.25, "x_vendor": {"k": [1, 2]}, "max_tokens":512, "seed":42,"top_p":1}`,
		},
		{
			name:  "keeps max_completion_tokens name",
			body:  `{"model":"a","messages":[],"max_completion_tokens":5}`,
			model: "b",
			s:     Sampling{MaxTokens: chatPtr(99)},
			want:  `{"model":"b","messages":[],"max_completion_tokens":99}`,
		},
		{
			name:  "adds missing fields",
			body:  "{\n  \"messages\": []\n}",
			model: "m",
			s:     Sampling{MaxTokens: chatPtr(3), Temperature: chatPtr(0.0)},
			want:  "{\n  \"messages\": [],\"model\":\"m\",\"temperature\":0,\"max_tokens\":3\n}",
		},
		{
			name:  "empty object",
			body:  `{}`,
			model: "m",
			want:  `{"model":"m"}`,
		},
		{
			name:  "nil sampling leaves caller values",
			body:  `{"model":"a","temperature":0.7,"stream":true,"stream_options":{"include_usage":true}}`,
			model: "b",
			want:  `{"model":"b","temperature":0.7,"stream":true,"stream_options":{"include_usage":true}}`,
		},
		{
			name:  "duplicate key replaced everywhere",
			body:  `{"model":"a","model":"c"}`,
			model: "b",
			want:  `{"model":"b","model":"b"}`,
		},
		{
			name:  "escaped keys and nested model fields untouched",
			body:  `{"meta":{"model":"inner"},"m\u006fdel":"x","tools":[{"function":{"name":"seed"}}]}`,
			model: "b",
			s:     Sampling{Seed: chatPtr(int64(3))},
			want:  `{"meta":{"model":"inner"},"m\u006fdel":"b","tools":[{"function":{"name":"seed"}}],"seed":3}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := OverlayChat([]byte(tt.body), tt.model, tt.s)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got), "OverlayChat(%q)", tt.body)
		})
	}
}

func TestOverlayChatRejects(t *testing.T) {
	for _, body := range []string{``, `[]`, `{"model":`, `{"a":1} {"b":2}`, `"x"`} {
		_, err := OverlayChat([]byte(body), "m", Sampling{})
		assert.Error(t, err, "OverlayChat(%q) = nil error, want one", body)
	}
}

func ExampleOverlayChat() {
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"x_vendor":{"cache":true},"max_completion_tokens":50}`)
	temp, limit := 0.2, 512
	out, err := OverlayChat(body, "run-model", Sampling{Temperature: &temp, MaxTokens: &limit})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out))
	// Output: {"model":"run-model","messages":[{"role":"user","content":"hi"}],"x_vendor":{"cache":true},"max_completion_tokens":512,"temperature":0.2}
}
