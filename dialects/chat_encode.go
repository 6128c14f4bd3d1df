package dialects

import (
	"cmp"
	"encoding/json"
	"fmt"

	jsonv1 "github.com/go-json-experiment/json/v1"
)

// EncodeRequest writes a non-streaming chat completions request.
func (chatDialect) EncodeRequest(req Request) ([]byte, error) {
	if err := cmp.Or(refusePreviousResponse(req), refuseGeminiSettings(req, "chat completions")); err != nil {
		return nil, fmt.Errorf("encode chat request: %w", err)
	}
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
		Parallel        *bool            `json:"parallel_tool_calls,omitempty"`
		ResponseFormat  map[string]any   `json:"response_format,omitempty"`
		N               int              `json:"n,omitempty"`
		Logprobs        bool             `json:"logprobs,omitempty"`
		TopLogprobs     *int             `json:"top_logprobs,omitempty"`
		User            string           `json:"user,omitempty"`
		Metadata        json.RawMessage  `json:"metadata,omitempty"`
		ServiceTier     string           `json:"service_tier,omitempty"`
	}{
		Model: req.Model, Messages: []chatOutMessage{},
		Temperature: req.Sampling.Temperature, TopP: req.Sampling.TopP,
		MaxTokens: req.Sampling.MaxTokens, Seed: req.Sampling.Seed,
		ToolChoice: chatToolChoice(req.ToolChoice), Stop: req.Stop,
		ResponseFormat: chatResponseFormat(req.Format), N: req.N,
		Logprobs: req.Logprobs || req.TopLogprobs != nil, TopLogprobs: req.TopLogprobs,
		User: openAIUser(req.User), Metadata: req.Metadata, ServiceTier: req.ServiceTier,
	}
	if req.Reasoning != nil {
		effort, err := openAIEffort(req)
		if err != nil {
			return nil, fmt.Errorf("encode chat request: %w", err)
		}
		out.ReasoningEffort = effort
	}
	for _, m := range req.Messages {
		out.Messages = append(out.Messages, chatOut(m))
	}
	for _, t := range req.Tools {
		out.Tools = append(out.Tools, tool{Type: "function", Function: fn(t)})
	}
	if len(out.Tools) > 0 { // OpenAI refuses parallel_tool_calls without tools
		out.Parallel = req.ParallelToolCalls
	}
	b, err := jsonv1.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode chat request: %w", err)
	}
	return b, nil
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
			"index": 0, "message": msg, "logprobs": chatLogprobsOut(resp.Logprobs),
			"finish_reason": orDefault(resp.FinishReason, FinishStop),
		}},
		"usage": chatOutUsageOf(resp.Usage),
	}
	b, err := jsonv1.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode chat response: %w", err)
	}
	return b, nil
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
		ReasoningContent: reasoningText(m), ReasoningDetails: chatReasoningDetails(m),
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
