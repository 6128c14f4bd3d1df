package dialects

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

// ParseRequest reads a Messages request. Every system block becomes a part
// of one leading system message; a user turn's tool_result blocks become
// tool messages ahead of the rest of the turn.
func (anthropicDialect) ParseRequest(body []byte) (Request, error) {
	var ar anthropicRequest
	if err := jsonwire.UnmarshalOwned(body, &ar); err != nil {
		return Request{}, fmt.Errorf("decode anthropic request: %w", err)
	}
	req := Request{
		Model: ar.Model, Stream: ar.Stream, From: NameAnthropic,
		Sampling: Sampling{Temperature: ar.Temperature, TopP: ar.TopP, MaxTokens: ar.MaxTokens},
	}
	req.ToolChoice = anthropicToolChoiceOf(ar.ToolChoice)
	req.ParallelToolCalls = anthropicParallelOf(ar.ToolChoice)
	req.Stop = ar.StopSequences
	var thinking, effort string
	var budget int
	if ar.Thinking != nil {
		thinking, budget = ar.Thinking.Type, ar.Thinking.BudgetTokens
	}
	req.Format = formatOfAnthropic(ar.OutputFormat)
	if ar.OutputConfig != nil {
		effort = ar.OutputConfig.Effort
		if f := formatOfAnthropic(ar.OutputConfig.Format); f != nil {
			req.Format = f
		}
	}
	req.Reasoning = anthropicReasoningOf(thinking, budget, effort)
	if ar.Metadata != nil {
		req.User = ar.Metadata.UserID
	}
	req.ServiceTier = serviceTierOf(ar.ServiceTier)
	sys, err := anthropicBlocks(ar.System)
	if err != nil {
		return Request{}, fmt.Errorf("decode anthropic request: system: %w", err)
	}
	if len(sys) > 0 {
		m := Message{Role: RoleSystem}
		for _, b := range sys {
			if p, ok := b.part(); ok {
				m.Content = append(m.Content, p)
			}
		}
		req.Messages = append(req.Messages, m)
	}
	for i, am := range ar.Messages {
		blocks, err := anthropicBlocks(am.Content)
		if err != nil {
			return Request{}, fmt.Errorf("decode anthropic request: message %d: %w", i, err)
		}
		if am.Role == RoleAssistant {
			m := anthropicAssistant(blocks)
			if err := unwrapCarried(&m); err != nil {
				return Request{}, fmt.Errorf("decode anthropic request: message %d: %w", i, err)
			}
			req.Messages = append(req.Messages, m)
			continue
		}
		rest := Message{Role: am.Role}
		for _, b := range blocks {
			if b.Type != "tool_result" {
				if p, ok := b.part(); ok {
					rest.Content = append(rest.Content, p)
				}
				continue
			}
			inner, err := anthropicBlocks(b.Content)
			if err != nil {
				return Request{}, fmt.Errorf("decode anthropic request: message %d: tool_result: %w", i, err)
			}
			tm := Message{Role: RoleTool, ToolCallID: b.ToolUseID}
			for _, ib := range inner {
				if p, ok := ib.part(); ok {
					tm.Content = append(tm.Content, p)
				}
			}
			req.Messages = append(req.Messages, tm)
		}
		if len(rest.Content) > 0 || !hasToolResult(blocks) {
			req.Messages = append(req.Messages, rest)
		}
	}
	for _, t := range ar.Tools {
		req.Tools = append(req.Tools, Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	return req, nil
}

func (anthropicDialect) Overlay(body []byte, model string, s Sampling) (Body, error) {
	return overlaySeedless("anthropic", body, anthropicRequestShape, model, s, "max_tokens")
}

type anthropicRequest struct {
	Model         string             `json:"model"`
	System        json.RawMessage    `json:"system"`
	Messages      []anthropicMessage `json:"messages"`
	Tools         []anthropicTool    `json:"tools"`
	MaxTokens     *int               `json:"max_tokens"`
	Temperature   *float64           `json:"temperature"`
	TopP          *float64           `json:"top_p"`
	Stream        bool               `json:"stream"`
	ToolChoice    json.RawMessage    `json:"tool_choice"`
	StopSequences []string           `json:"stop_sequences"`
	Thinking      *struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	} `json:"thinking"`
	OutputConfig *struct {
		Effort string          `json:"effort"`
		Format json.RawMessage `json:"format"`
	} `json:"output_config"`
	// OutputFormat is the structured outputs beta's name of
	// output_config.format.
	OutputFormat json.RawMessage `json:"output_format"`
	Metadata     *struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`
	ServiceTier string `json:"service_tier"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthropicTool struct {
	Type        string          `json:"type,omitempty"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// anthropicBlock is any content block; only the fields of its type are set.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Source    *imageSource    `json:"source,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	Data      string          `json:"data,omitempty"`
}

type imageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// The shapes of what ParseRequest reads: Overlay checks a body against
// anthropicRequestShape (overlay.go).
var (
	anthropicRequestShape = jsonwire.Of(reflect.TypeFor[anthropicRequest](),
		jsonwire.Union(reflect.TypeFor[anthropicRequest](), "system", reflect.TypeFor[string](), reflect.TypeFor[[]anthropicBlock]()),
		jsonwire.Hook(reflect.TypeFor[anthropicMessage](), checkAnthropicMessage))
	// anthropicBlocksShape is what anthropicBlocks reads.
	anthropicBlocksShape = jsonwire.OneOf([]reflect.Type{reflect.TypeFor[string](), reflect.TypeFor[[]anthropicBlock]()})
	// anthropicUserBlocksShape is a user turn's content: its tool_result
	// blocks' content is read too.
	anthropicUserBlocksShape = jsonwire.OneOf([]reflect.Type{reflect.TypeFor[string](), reflect.TypeFor[[]anthropicBlock]()},
		jsonwire.Hook(reflect.TypeFor[anthropicBlock](), func(o jsonwire.Object) error {
			if o.String("type") == "tool_result" {
				return o.Check("content", anthropicBlocksShape)
			}
			return nil
		}))
)

// checkAnthropicMessage checks a message's content as ParseRequest reads
// it: blocks, and in a user turn the content of tool_result blocks too.
func checkAnthropicMessage(o jsonwire.Object) error {
	if o.String("role") == RoleAssistant {
		return o.Check("content", anthropicBlocksShape)
	}
	return o.Check("content", anthropicUserBlocksShape)
}

// anthropicBlocks reads content: a string or an array of blocks.
func anthropicBlocks(raw json.RawMessage) ([]anthropicBlock, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] == '"' {
		s, err := jsonwire.UnquoteOwned(raw) // raw is a decoded field
		if err != nil {
			return nil, fmt.Errorf("content: %w", err)
		}
		return []anthropicBlock{{Type: "text", Text: s}}, nil
	}
	var bs []anthropicBlock
	if err := jsonwire.Unmarshal(raw, &bs); err != nil {
		return nil, fmt.Errorf("content: %w", err)
	}
	return bs, nil
}

func (b anthropicBlock) part() (Part, bool) {
	switch b.Type {
	case "text":
		return Part{Type: PartText, Text: b.Text}, true
	case "image":
		if b.Source == nil {
			return Part{}, false
		}
		if b.Source.Type == "url" {
			return Part{Type: PartImage, ImageURL: b.Source.URL}, true
		}
		return Part{Type: PartImage, ImageURL: "data:" + b.Source.MediaType + ";base64," + b.Source.Data}, true
	}
	return Part{}, false
}

func hasToolResult(bs []anthropicBlock) bool {
	for _, b := range bs {
		if b.Type == "tool_result" {
			return true
		}
	}
	return false
}

// anthropicAssistant reads an assistant turn's blocks.
func anthropicAssistant(blocks []anthropicBlock) Message {
	m := Message{Role: RoleAssistant}
	for _, b := range blocks {
		switch b.Type {
		case "tool_use":
			args := string(bytes.TrimSpace(b.Input))
			if args == "" || args == "null" {
				args = "{}"
			}
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		case "thinking":
			t := Thinking{}
			if b.Thinking != nil {
				t.Text = *b.Thinking
			}
			if b.Signature != nil {
				t.Signature = *b.Signature
			}
			m.Thinking = append(m.Thinking, t)
		case "redacted_thinking":
			m.Thinking = append(m.Thinking, Thinking{Redacted: b.Data})
		default:
			if p, ok := b.part(); ok {
				m.Content = append(m.Content, p)
			}
		}
	}
	m.Reasoning = joinReasoning(m.Thinking)
	return m
}
