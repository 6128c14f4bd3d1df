package mock

import (
	"encoding/json"
	"strings"
)

// chatRequest is the part of a chat completions request the mock reads.
type chatRequest struct {
	Model    string        `json:"model"`
	Messages []chatMessage `json:"messages"`
	Tools    []chatTool    `json:"tools"`
	Stream   bool          `json:"stream"`
	// ReasoningEffort, when set, makes the mock show its reasoning.
	ReasoningEffort string `json:"reasoning_effort"`
	StreamOptions   *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// Logprobs, TopLogprobs and ReturnTokenIDs (vLLM's) ask for
	// token-level data (tokens.go).
	Logprobs       bool `json:"logprobs"`
	TopLogprobs    int  `json:"top_logprobs"`
	ReturnTokenIDs bool `json:"return_token_ids"`
	// promptTokens are the prompt's ids when the caller gave them
	// (/v1/chat/completions/tokens).
	promptTokens []int32
}

func (r chatRequest) includeUsage() bool {
	return r.StreamOptions != nil && r.StreamOptions.IncludeUsage
}

// offers reports whether the request offers a tool named name.
func (r chatRequest) offers(name string) bool {
	for _, t := range r.Tools {
		if t.Function.Name == name || t.Name == name {
			return true
		}
	}
	return false
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []wireToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

// text returns the message's content: a string, or its text parts joined.
func (m chatMessage) text() string {
	if len(m.Content) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// chatTool accepts both the chat shape {"type":"function","function":{"name"}}
// and the flat {"type":"function","name"} one.
type chatTool struct {
	Type     string `json:"type"`
	Name     string `json:"name"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

type wireToolCall struct {
	// Index is set in stream deltas only.
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// completion is a chat.completion or, with Delta choices, a chunk.
type completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   *usage   `json:"usage,omitempty"`
	// PromptTokenIDs is vLLM's, with return_token_ids: in the first chunk
	// of a stream.
	PromptTokenIDs []int32 `json:"prompt_token_ids,omitempty"`
}

type choice struct {
	Index        int          `json:"index"`
	Message      *fullMessage `json:"message,omitempty"`
	Delta        *delta       `json:"delta,omitempty"`
	FinishReason *string      `json:"finish_reason"`
	TokenIDs     []int32      `json:"token_ids,omitempty"`
	Logprobs     *logprobs    `json:"logprobs,omitempty"`
}

// fullMessage is a non-streamed assistant message; content is null when the
// model calls tools, as OpenAI sends it.
type fullMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	Refusal   *string        `json:"refusal"`
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
	// ReasoningContent is set when the request asked for reasoning.
	ReasoningContent *string `json:"reasoning_content,omitempty"`
}

// delta is one stream chunk's piece of the assistant message.
type delta struct {
	Role             string         `json:"role,omitempty"`
	Content          *string        `json:"content,omitempty"`
	ReasoningContent *string        `json:"reasoning_content,omitempty"`
	ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}
