package dialects

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// anthropicDialect is Anthropic Messages.
type anthropicDialect struct{}

var _ Dialect = anthropicDialect{}

func (anthropicDialect) Name() string { return NameAnthropic }
func (anthropicDialect) Path() string { return "/messages" }

func (anthropicDialect) Secret(h http.Header) string {
	if s := h.Get("X-Api-Key"); s != "" {
		return s
	}
	return bearer(h)
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

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// usage counts cached input in InputTokens, as OpenAI does.
func (u anthropicUsage) usage() Usage {
	return Usage{
		InputTokens:      u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens,
		OutputTokens:     u.OutputTokens,
		CacheReadTokens:  u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheCreationInputTokens,
	}
}

type anthropicResponse struct {
	ID         string           `json:"id"`
	Type       string           `json:"type"`
	Role       string           `json:"role"`
	Model      string           `json:"model"`
	Content    []anthropicBlock `json:"content"`
	StopReason string           `json:"stop_reason"`
	Usage      anthropicUsage   `json:"usage"`
}

// anthropicBlocks reads content: a string or an array of blocks.
func anthropicBlocks(raw json.RawMessage) ([]anthropicBlock, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] == '"' {
		s, err := unquote(raw)
		if err != nil {
			return nil, fmt.Errorf("content: %w", err)
		}
		return []anthropicBlock{{Type: "text", Text: s}}, nil
	}
	var bs []anthropicBlock
	if err := unmarshal(raw, &bs); err != nil {
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

// ParseRequest reads a Messages request. Every system block becomes a part
// of one leading system message; a user turn's tool_result blocks become
// tool messages ahead of the rest of the turn.
func (anthropicDialect) ParseRequest(body []byte) (Request, error) {
	var ar anthropicRequest
	if err := unmarshal(body, &ar); err != nil {
		return Request{}, fmt.Errorf("decode anthropic request: %w", err)
	}
	req := Request{
		Model: ar.Model, Stream: ar.Stream,
		Sampling: Sampling{Temperature: ar.Temperature, TopP: ar.TopP, MaxTokens: ar.MaxTokens},
	}
	req.ToolChoice = anthropicToolChoiceOf(ar.ToolChoice)
	req.Stop = ar.StopSequences
	if ar.Thinking != nil && ar.Thinking.Type == "enabled" {
		req.Reasoning = &ReasoningConfig{BudgetTokens: ar.Thinking.BudgetTokens}
	}
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
			req.Messages = append(req.Messages, anthropicAssistant(blocks))
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

// anthropicFinish maps a stop_reason to the typed finish reason.
func anthropicFinish(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return FinishLength
	case "tool_use":
		return FinishToolCalls
	case "refusal":
		return FinishContentFilter
	case "":
		return ""
	}
	return FinishStop
}

// ParseResponse reads a Message object.
func (anthropicDialect) ParseResponse(body []byte) (Response, error) {
	var ar anthropicResponse
	if err := unmarshal(body, &ar); err != nil {
		return Response{}, fmt.Errorf("decode anthropic response: %w", err)
	}
	if ar.Type == "error" {
		return Response{}, anthropicDialect{}.ParseError(0, body)
	}
	return anthropicResponseOf(ar), nil
}

func anthropicResponseOf(ar anthropicResponse) Response {
	r := Response{ID: ar.ID, Model: ar.Model, Message: anthropicAssistant(ar.Content),
		FinishReason: anthropicFinish(ar.StopReason), Usage: ar.Usage.usage()}
	if ar.StopReason == "refusal" && r.Message.Refusal == "" {
		r.Message.Refusal = textOf(r.Message.Content)
	}
	return r
}

// AnthropicError is an error in Anthropic's shape,
// {"type":"error","error":{"type","message"}}.
type AnthropicError struct {
	// Status is the HTTP status it came with; 0 inside a stream.
	Status  int
	Type    string
	Message string
}

// Error implements error.
func (e *AnthropicError) Error() string {
	var b strings.Builder
	if e.Status != 0 {
		fmt.Fprintf(&b, "status %d: ", e.Status)
	}
	if e.Type != "" {
		b.WriteString(e.Type + ": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// ParseError reads an error body in Anthropic's shape; another body becomes
// the message, cut to a bounded length.
func (anthropicDialect) ParseError(status int, body []byte) error {
	var env struct {
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if unmarshal(body, &env) == nil && env.Error != nil {
		return &AnthropicError{Status: status, Type: env.Error.Type, Message: env.Error.Message}
	}
	msg := truncateText(string(bytes.TrimSpace(body)), maxErrorText)
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &AnthropicError{Status: status, Message: msg}
}

func anthropicErrorBody(status int, message string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{
		"type": errorType(status, true), "message": message,
	}})
	return b
}

func (anthropicDialect) WriteError(w http.ResponseWriter, status int, _, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(anthropicErrorBody(status, message))
}

func (anthropicDialect) StreamError(message string) []byte {
	return []byte("event: error\ndata: " + string(anthropicErrorBody(http.StatusInternalServerError, message)) + "\n\n")
}
