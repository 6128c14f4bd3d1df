package dialects

import (
	"encoding/json"
	"fmt"
	"strings"

	jsonv1 "github.com/go-json-experiment/json/v1"
)

// EncodeRequest writes a non-streaming Messages request. System and
// developer messages, wherever they are, become system blocks in order;
// tool results join the user turn; consecutive turns of a role merge.
func (anthropicDialect) EncodeRequest(req Request) ([]byte, error) {
	if err := refusePreviousResponse(req); err != nil {
		return nil, fmt.Errorf("encode anthropic request: %w", err)
	}
	type msg struct {
		Role    string           `json:"role"`
		Content []anthropicBlock `json:"content"`
	}
	set, err := anthropicSettingsOf(req)
	if err != nil {
		return nil, fmt.Errorf("encode anthropic request: %w", err)
	}
	out := struct {
		Model        string                `json:"model"`
		System       []anthropicBlock      `json:"system,omitempty"`
		Messages     []msg                 `json:"messages"`
		Tools        []anthropicTool       `json:"tools,omitempty"`
		MaxTokens    int                   `json:"max_tokens"`
		Temperature  *float64              `json:"temperature,omitempty"`
		TopP         *float64              `json:"top_p,omitempty"`
		Thinking     *anthropicThinkingOut `json:"thinking,omitempty"`
		OutputConfig map[string]any        `json:"output_config,omitempty"`
		ToolChoice   map[string]any        `json:"tool_choice,omitempty"`
		Stop         []string              `json:"stop_sequences,omitempty"`
		Metadata     map[string]string     `json:"metadata,omitempty"`
		ServiceTier  string                `json:"service_tier,omitempty"`
	}{Model: req.Model, ToolChoice: anthropicToolChoiceOut(req.ToolChoice, req.ParallelToolCalls, len(req.Tools) > 0),
		Stop: req.Stop, Messages: []msg{}, MaxTokens: set.maxTokens, Thinking: set.thinking, OutputConfig: set.outputConfig,
		Temperature: req.Sampling.Temperature, TopP: req.Sampling.TopP, ServiceTier: set.serviceTier}
	if req.User != "" {
		out.Metadata = map[string]string{"user_id": req.User}
	}
	add := func(role string, blocks []anthropicBlock) {
		if n := len(out.Messages); n > 0 && out.Messages[n-1].Role == role {
			out.Messages[n-1].Content = append(out.Messages[n-1].Content, blocks...)
			return
		}
		out.Messages = append(out.Messages, msg{Role: role, Content: blocks})
	}
	for _, m := range req.Messages {
		switch m.Role {
		case RoleSystem, RoleDeveloper:
			out.System = append(out.System, anthropicParts(m.Content)...)
		case RoleAssistant:
			add(RoleAssistant, anthropicAssistantBlocks(m, false))
		case RoleTool:
			content, _ := jsonv1.Marshal(anthropicParts(m.Content))
			if len(m.Content) == 1 && m.Content[0].Type == PartText || len(m.Content) == 0 {
				content, _ = jsonv1.Marshal(textOf(m.Content))
			}
			add(RoleUser, []anthropicBlock{{Type: "tool_result", ToolUseID: m.ToolCallID, Content: content}})
		default:
			// An empty turn (a Responses item with no content) has no
			// Anthropic form; Anthropic rejects empty text blocks.
			if blocks := anthropicParts(m.Content); len(blocks) > 0 {
				add(RoleUser, blocks)
			}
		}
	}
	// A caller that echoed its last tool-calling turn without the thinking
	// block it was given (an SDK that keeps no reasoning_details or
	// encrypted_content) cannot be answered with thinking on: Anthropic
	// rejects such a turn. Thinking is off for this request only, which
	// Anthropic accepts (earlier thinking blocks are then ignored); the next
	// turn, once the tool loop ends, thinks again.
	for i := len(out.Messages) - 1; i >= 0 && out.Thinking != nil; i-- {
		if out.Messages[i].Role == RoleAssistant {
			if !anthropicThinkingReturned(out.Messages[i].Content) {
				out.Thinking = nil
			}
			break
		}
	}
	for _, t := range req.Tools {
		schema := t.Parameters
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		out.Tools = append(out.Tools, anthropicTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	b, err := jsonv1.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode anthropic request: %w", err)
	}
	return b, nil
}

// EncodeResponse writes a Message object. Reasoning without a signature is
// sent as an unsigned thinking block, so the caller shows it and echoes it.
func (anthropicDialect) EncodeResponse(resp Response) ([]byte, error) {
	b, err := jsonv1.Marshal(anthropicMessageOf(resp, anthropicAssistantBlocks(resp.Message, true)))
	if err != nil {
		return nil, fmt.Errorf("encode anthropic response: %w", err)
	}
	return b, nil
}

// anthropicSettings are the fields of an Anthropic request that the
// request's settings become, besides its messages and tools.
type anthropicSettings struct {
	thinking     *anthropicThinkingOut
	outputConfig map[string]any // effort and format
	maxTokens    int
	serviceTier  string
}

// anthropicSettingsOf is what req's settings become toward Anthropic, or
// the first one Anthropic cannot take, refused.
func anthropicSettingsOf(req Request) (anthropicSettings, error) {
	var s anthropicSettings
	thinking, effort, maxTokens, err := anthropicThinking(req)
	if err != nil {
		return s, err
	}
	s.thinking, s.maxTokens = thinking, maxTokens
	if err := anthropicRefusals(req); err != nil {
		return s, err
	}
	if s.serviceTier, err = anthropicServiceTier(req); err != nil {
		return s, err
	}
	format, err := anthropicFormat(req)
	if err != nil {
		return s, err
	}
	if effort != "" || format != nil {
		s.outputConfig = map[string]any{}
		if effort != "" {
			s.outputConfig["effort"] = effort
		}
		if format != nil {
			s.outputConfig["format"] = format
		}
	}
	return s, nil
}

// DefaultAnthropicMaxTokens is the max_tokens a request translated to
// Anthropic gets when the caller set none: Anthropic requires the field.
const DefaultAnthropicMaxTokens = 4096

func anthropicParts(parts []Part) []anthropicBlock {
	var out []anthropicBlock
	for _, p := range parts {
		switch p.Type {
		case PartText:
			if p.Text != "" { // Anthropic rejects empty text blocks
				out = append(out, anthropicBlock{Type: "text", Text: p.Text})
			}
		case PartImage:
			if mt, data, ok := dataURL(p.ImageURL); ok {
				out = append(out, anthropicBlock{Type: "image", Source: &imageSource{Type: "base64", MediaType: mt, Data: data}})
			} else {
				out = append(out, anthropicBlock{Type: "image", Source: &imageSource{Type: "url", URL: p.ImageURL}})
			}
		}
	}
	return out
}

// dataURL splits a data: URL into media type and base64 data.
func dataURL(u string) (mediaType, data string, ok bool) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return "", "", false
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return "", "", false
	}
	mediaType, isBase64 := strings.CutSuffix(meta, ";base64")
	if !isBase64 {
		return "", "", false
	}
	return mediaType, data, true
}

// anthropicAssistantBlocks writes an assistant message: for a caller
// (forCaller) with every reasoning block it may echo, for an upstream with
// the blocks it takes back (carry.go).
func anthropicAssistantBlocks(m Message, forCaller bool) []anthropicBlock {
	out := anthropicThinkingBlocks(m, forCaller)
	out = append(out, anthropicParts(m.Content)...)
	if m.Refusal != "" && textOf(m.Content) == "" {
		out = append(out, anthropicBlock{Type: "text", Text: m.Refusal})
	}
	for _, tc := range m.ToolCalls {
		out = append(out, anthropicBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: rawArgs(tc.Arguments)})
	}
	return out
}

func anthropicStop(finish string) string {
	switch finish {
	case FinishLength:
		return "max_tokens"
	case FinishToolCalls:
		return "tool_use"
	case FinishContentFilter:
		return "refusal"
	}
	return "end_turn"
}

// anthropicStopOf is resp's stop_reason; a refusal with no other text is
// Anthropic's refusal whatever finish reason came with it.
func anthropicStopOf(resp Response) string {
	if resp.Message.Refusal != "" && textOf(resp.Message.Content) == "" && len(resp.Message.ToolCalls) == 0 {
		return "refusal"
	}
	return anthropicStop(resp.FinishReason)
}

func anthropicUsageOf(u Usage) map[string]int {
	in := max(u.InputTokens-u.CacheReadTokens-u.CacheWriteTokens, 0)
	return map[string]int{
		"input_tokens": in, "output_tokens": u.OutputTokens,
		"cache_creation_input_tokens": u.CacheWriteTokens, "cache_read_input_tokens": u.CacheReadTokens,
	}
}

func anthropicMessageOf(resp Response, content []anthropicBlock) map[string]any {
	if content == nil {
		content = []anthropicBlock{}
	}
	return map[string]any{
		"id": orDefault(resp.ID, "msg_evalflow"), "type": "message", "role": RoleAssistant,
		"model": resp.Model, "content": content,
		"stop_reason": anthropicStopOf(resp), "stop_sequence": nil,
		"usage": anthropicUsageOf(resp.Usage),
	}
}
