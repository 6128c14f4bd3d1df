package dialects

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// chatDialect is OpenAI chat completions.
type chatDialect struct{}

var _ Dialect = chatDialect{}

func (chatDialect) Name() string { return NameChat }
func (chatDialect) Path() string { return "/chat/completions" }

func (chatDialect) Secret(h http.Header) string {
	if s := bearer(h); s != "" {
		return s
	}
	return h.Get("X-Api-Key")
}

func (chatDialect) ParseRequest(body []byte) (Request, error)   { return ParseChatRequest(body) }
func (chatDialect) ParseResponse(body []byte) (Response, error) { return ParseChatResponse(body) }
func (chatDialect) NewStream() Stream                           { return &ChatStream{} }
func (chatDialect) ParseError(status int, body []byte) error    { return ParseChatError(status, body) }

func (chatDialect) Overlay(body []byte, model string, s Sampling) (Body, error) {
	return overlayChat(body, model, s)
}

func (chatDialect) WriteError(w http.ResponseWriter, status int, code, message string) {
	WriteChatError(w, status, errorType(status, false), code, message)
}

func (chatDialect) StreamError(message string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": message, "type": ErrorTypeServer, "param": nil, "code": nil,
	}})
	return append(append([]byte("data: "), b...), "\n\n"...)
}

type chatOutMessage struct {
	Role             string            `json:"role"`
	Content          any               `json:"content"`
	Name             string            `json:"name,omitempty"`
	Refusal          *string           `json:"refusal,omitempty"`
	ReasoningContent string            `json:"reasoning_content,omitempty"`
	ReasoningDetails json.RawMessage   `json:"reasoning_details,omitempty"`
	ToolCalls        []chatOutToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string            `json:"tool_call_id,omitempty"`
}

type chatOutToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatOutPart struct {
	Type     string            `json:"type"`
	Text     string            `json:"text,omitempty"`
	ImageURL map[string]string `json:"image_url,omitempty"`
}

// chatContent is content as chat sends it: a string when it is only text,
// parts when it holds images, null for an assistant turn of only tool calls.
func chatContent(m Message) any {
	hasImage := false
	for _, p := range m.Content {
		if p.Type == PartImage {
			hasImage = true
		}
	}
	if !hasImage {
		if len(m.Content) == 0 && m.Role == RoleAssistant && (len(m.ToolCalls) > 0 || m.Refusal != "") {
			return nil
		}
		return textOf(m.Content)
	}
	var parts []chatOutPart
	for _, p := range m.Content {
		switch p.Type {
		case PartText:
			parts = append(parts, chatOutPart{Type: "text", Text: p.Text})
		case PartImage:
			parts = append(parts, chatOutPart{Type: "image_url", ImageURL: map[string]string{"url": p.ImageURL}})
		}
	}
	return parts
}

func chatOut(m Message) chatOutMessage {
	out := chatOutMessage{
		Role: m.Role, Content: chatContent(m), Name: m.Name, ToolCallID: m.ToolCallID,
		ReasoningContent: m.Reasoning, ReasoningDetails: m.ReasoningDetails,
	}
	if out.ReasoningContent == "" {
		out.ReasoningContent = joinReasoning(m.Thinking)
	}
	if m.Refusal != "" {
		out.Refusal = &m.Refusal
	}
	for _, tc := range m.ToolCalls {
		var c chatOutToolCall
		c.ID, c.Type = tc.ID, "function"
		c.Function.Name, c.Function.Arguments = tc.Name, tc.Arguments
		if c.Function.Arguments == "" {
			c.Function.Arguments = "{}"
		}
		out.ToolCalls = append(out.ToolCalls, c)
	}
	return out
}

// EncodeRequest writes a non-streaming chat completions request.
func (chatDialect) EncodeRequest(req Request) ([]byte, error) {
	type fn struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	}
	type tool struct {
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	out := struct {
		Model           string           `json:"model"`
		Messages        []chatOutMessage `json:"messages"`
		Tools           []tool           `json:"tools,omitempty"`
		Temperature     *float64         `json:"temperature,omitempty"`
		TopP            *float64         `json:"top_p,omitempty"`
		MaxTokens       *int             `json:"max_tokens,omitempty"`
		Seed            *int64           `json:"seed,omitempty"`
		ReasoningEffort string           `json:"reasoning_effort,omitempty"`
		ToolChoice      any              `json:"tool_choice,omitempty"`
		Stop            []string         `json:"stop,omitempty"`
	}{
		Model: req.Model, Messages: []chatOutMessage{},
		Temperature: req.Sampling.Temperature, TopP: req.Sampling.TopP,
		MaxTokens: req.Sampling.MaxTokens, Seed: req.Sampling.Seed,
		ToolChoice: chatToolChoice(req.ToolChoice), Stop: req.Stop,
	}
	if req.Reasoning != nil {
		out.ReasoningEffort = effortOf(req.Reasoning)
	}
	for _, m := range req.Messages {
		out.Messages = append(out.Messages, chatOut(m))
	}
	for _, t := range req.Tools {
		out.Tools = append(out.Tools, tool{Type: "function", Function: fn(t)})
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode chat request: %w", err)
	}
	return b, nil
}

type chatOutUsage struct {
	PromptTokens            int            `json:"prompt_tokens"`
	CompletionTokens        int            `json:"completion_tokens"`
	TotalTokens             int            `json:"total_tokens"`
	PromptTokensDetails     map[string]int `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails map[string]int `json:"completion_tokens_details,omitempty"`
}

func chatOutUsageOf(u Usage) *chatOutUsage {
	out := &chatOutUsage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.InputTokens + u.OutputTokens}
	if u.CacheReadTokens > 0 {
		out.PromptTokensDetails = map[string]int{"cached_tokens": u.CacheReadTokens}
	}
	if u.ReasoningTokens > 0 {
		out.CompletionTokensDetails = map[string]int{"reasoning_tokens": u.ReasoningTokens}
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// EncodeResponse writes a chat.completion object.
func (chatDialect) EncodeResponse(resp Response) ([]byte, error) {
	msg := chatOut(resp.Message)
	msg.Role = RoleAssistant
	if msg.Content == "" && len(resp.Message.ToolCalls) > 0 {
		msg.Content = nil
	}
	out := map[string]any{
		"id":      orDefault(resp.ID, "chatcmpl-evalflow"),
		"object":  "chat.completion",
		"created": 0,
		"model":   resp.Model,
		"choices": []any{map[string]any{
			"index": 0, "message": msg, "logprobs": nil,
			"finish_reason": orDefault(resp.FinishReason, FinishStop),
		}},
		"usage": chatOutUsageOf(resp.Usage),
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode chat response: %w", err)
	}
	return b, nil
}

// WriteStream writes chat.completion.chunk events and [DONE]. Usage rides
// on the chunk with the finish reason.
func (chatDialect) WriteStream(w io.Writer, resp Response) error {
	type delta struct {
		Role             string            `json:"role,omitempty"`
		Content          *string           `json:"content,omitempty"`
		ReasoningContent *string           `json:"reasoning_content,omitempty"`
		Refusal          *string           `json:"refusal,omitempty"`
		ToolCalls        []chatOutToolCall `json:"tool_calls,omitempty"`
	}
	id := orDefault(resp.ID, "chatcmpl-evalflow")
	s := &sse{w: w}
	chunk := func(d delta, finish *string, u *chatOutUsage) {
		c := map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": 0, "model": resp.Model,
			"choices": []any{map[string]any{"index": 0, "delta": d, "finish_reason": finish, "logprobs": nil}},
		}
		if u != nil {
			c["usage"] = u
		}
		s.event("", c)
	}
	empty := ""
	chunk(delta{Role: RoleAssistant, Content: &empty}, nil, nil)
	reasoning := resp.Message.Reasoning
	if reasoning == "" {
		reasoning = joinReasoning(resp.Message.Thinking)
	}
	for _, p := range pieces(reasoning, 4) {
		chunk(delta{ReasoningContent: &p}, nil, nil)
	}
	for _, p := range pieces(textOf(resp.Message.Content), 4) {
		chunk(delta{Content: &p}, nil, nil)
	}
	for _, p := range pieces(resp.Message.Refusal, 2) {
		chunk(delta{Refusal: &p}, nil, nil)
	}
	for i, tc := range resp.Message.ToolCalls {
		var head chatOutToolCall
		head.Index, head.ID, head.Type = &i, tc.ID, "function"
		head.Function.Name = tc.Name
		chunk(delta{ToolCalls: []chatOutToolCall{head}}, nil, nil)
		args := tc.Arguments
		if args == "" {
			args = "{}"
		}
		for _, p := range pieces(args, 3) {
			var part chatOutToolCall
			part.Index = &i
			part.Function.Arguments = p
			chunk(delta{ToolCalls: []chatOutToolCall{part}}, nil, nil)
		}
	}
	finish := orDefault(resp.FinishReason, FinishStop)
	chunk(delta{}, &finish, chatOutUsageOf(resp.Usage))
	s.raw("", []byte("[DONE]"))
	return s.err
}
