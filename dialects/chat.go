package dialects

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// chatRequest is the part of a chat completions request evalflow reads. Fields
// it does not name are never dropped on relay: see OverlayChat.
type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Tools               []chatTool      `json:"tools"`
	Functions           []chatFunc      `json:"functions"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Seed                *int64          `json:"seed"`
	Stream              bool            `json:"stream"`
	ReasoningEffort     string          `json:"reasoning_effort"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	Stop                json.RawMessage `json:"stop"`
}

// chatMessage is a request or response message. Content is a string, an array
// of parts or null.
type chatMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	Name             string          `json:"name"`
	ToolCalls        []chatToolCall  `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
	Refusal          *string         `json:"refusal"`
	ReasoningContent *string         `json:"reasoning_content"`
	Reasoning        *string         `json:"reasoning"`
	ReasoningDetails json.RawMessage `json:"reasoning_details"`
}

type chatPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

type chatToolCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatTool struct {
	Type     string   `json:"type"`
	Function chatFunc `json:"function"`
}

type chatFunc struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

type chatUsage struct {
	PromptTokens            int `json:"prompt_tokens"`
	CompletionTokens        int `json:"completion_tokens"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *chatUsage) usage() Usage {
	if u == nil {
		return Usage{}
	}
	out := Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if u.CompletionTokensDetails != nil {
		out.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	}
	if u.PromptTokensDetails != nil {
		out.CacheReadTokens = u.PromptTokensDetails.CachedTokens
	}
	return out
}

type chatResponse struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int         `json:"index"`
		Message      chatMessage `json:"message"`
		FinishReason string      `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatUsage `json:"usage"`
}

// ParseChatRequest reads a chat completions request body into the typed
// vocabulary. Content parts it has no type for (audio, files) are skipped.
func ParseChatRequest(body []byte) (Request, error) {
	var cr chatRequest
	if err := unmarshal(body, &cr); err != nil {
		return Request{}, fmt.Errorf("decode chat request: %w", err)
	}
	req := Request{
		Model:  cr.Model,
		Stream: cr.Stream,
		Sampling: Sampling{
			Temperature: cr.Temperature,
			TopP:        cr.TopP,
			MaxTokens:   cr.MaxTokens,
			Seed:        cr.Seed,
		},
	}
	if req.Sampling.MaxTokens == nil {
		req.Sampling.MaxTokens = cr.MaxCompletionTokens
	}
	if cr.ReasoningEffort != "" {
		req.Reasoning = &ReasoningConfig{Effort: cr.ReasoningEffort}
	}
	req.ToolChoice = openAIToolChoice(cr.ToolChoice)
	req.Stop = stopOf(cr.Stop)
	for i, cm := range cr.Messages {
		m, err := cm.message()
		if err != nil {
			return Request{}, fmt.Errorf("decode chat request: message %d: %w", i, err)
		}
		req.Messages = append(req.Messages, m)
	}
	for _, t := range cr.Tools {
		if t.Type != "" && t.Type != "function" {
			continue
		}
		req.Tools = append(req.Tools, Tool(t.Function))
	}
	for _, f := range cr.Functions {
		req.Tools = append(req.Tools, Tool(f))
	}
	return req, nil
}

// ParseChatResponse reads a non-streaming chat completions response body. Only
// the first choice is kept.
func ParseChatResponse(body []byte) (Response, error) {
	var cr chatResponse
	if err := unmarshal(body, &cr); err != nil {
		return Response{}, fmt.Errorf("decode chat response: %w", err)
	}
	resp := Response{ID: cr.ID, Model: cr.Model, Usage: cr.Usage.usage()}
	for _, c := range cr.Choices {
		if c.Index != 0 {
			continue
		}
		m, err := c.Message.message()
		if err != nil {
			return Response{}, fmt.Errorf("decode chat response: %w", err)
		}
		if m.Role == "" {
			m.Role = RoleAssistant
		}
		resp.Message = m
		resp.FinishReason = c.FinishReason
		break
	}
	return resp, nil
}

func (cm chatMessage) message() (Message, error) {
	m := Message{Role: cm.Role, Name: cm.Name, ToolCallID: cm.ToolCallID}
	parts, refusal, err := parseChatContent(cm.Content)
	if err != nil {
		return Message{}, err
	}
	m.Content = parts
	m.Refusal = refusal
	if cm.Refusal != nil {
		m.Refusal = *cm.Refusal
	}
	switch {
	case cm.ReasoningContent != nil:
		m.Reasoning = *cm.ReasoningContent
	case cm.Reasoning != nil:
		m.Reasoning = *cm.Reasoning
	}
	if d := bytes.TrimSpace(cm.ReasoningDetails); len(d) > 0 && !bytes.Equal(d, []byte("null")) {
		m.ReasoningDetails = append(json.RawMessage(nil), d...)
	}
	for _, tc := range cm.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return m, nil
}

// scalarContent reads content given as null, absent or a JSON string; ok is
// false when raw is something else (an array of parts).
func scalarContent(raw json.RawMessage) (parts []Part, ok bool, err error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, true, nil
	}
	if raw[0] != '"' {
		return nil, false, nil
	}
	s, err := unquote(raw)
	if err != nil {
		return nil, true, fmt.Errorf("content: %w", err)
	}
	if s == "" {
		return nil, true, nil
	}
	return []Part{{Type: PartText, Text: s}}, true, nil
}

// parseChatContent reads message content: a string, an array of parts, or
// null. Refusal parts (assistant messages) are returned apart.
func parseChatContent(raw json.RawMessage) ([]Part, string, error) {
	raw = bytes.TrimSpace(raw)
	if parts, ok, err := scalarContent(raw); ok {
		return parts, "", err
	}
	var cps []chatPart
	if err := unmarshal(raw, &cps); err != nil {
		return nil, "", fmt.Errorf("content: %w", err)
	}
	var parts []Part
	var refusal string
	for _, p := range cps {
		switch p.Type {
		case "text":
			parts = append(parts, Part{Type: PartText, Text: p.Text})
		case "image_url":
			if p.ImageURL != nil {
				parts = append(parts, Part{Type: PartImage, ImageURL: p.ImageURL.URL})
			}
		case "refusal":
			refusal += p.Refusal
		}
	}
	return parts, refusal, nil
}

// unquote decodes a JSON string that an enclosing Unmarshal has already
// validated. Without escapes and with valid UTF-8, the bytes between the
// quotes are the string: a prompt of a megabyte is then copied once
// instead of being scanned twice more.
func unquote(raw []byte) (string, error) {
	if len(raw) >= 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw[1:len(raw)-1], '\\') < 0 &&
		bytes.IndexByte(raw[1:len(raw)-1], '"') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	err := unmarshal(raw, &s)
	return s, err
}
