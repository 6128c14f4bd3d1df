package dialects

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

// ParseRequest reads a Responses request. instructions become a leading
// system message; each run of assistant-side items (reasoning, assistant
// messages, function calls) folds into one assistant message.
func (responsesDialect) ParseRequest(body []byte) (Request, error) {
	var rr responsesRequest
	if err := jsonwire.UnmarshalOwned(body, &rr); err != nil {
		return Request{}, fmt.Errorf("decode responses request: %w", err)
	}
	req := Request{Model: rr.Model, Stream: rr.Stream, From: NameResponses,
		Sampling: Sampling{Temperature: rr.Temperature, TopP: rr.TopP, MaxTokens: rr.MaxOutputTokens}}
	if rr.Reasoning != nil {
		req.Reasoning = &ReasoningConfig{Effort: rr.Reasoning.Effort, Summary: rr.Reasoning.Summary}
	}
	req.ToolChoice = openAIToolChoice(rr.ToolChoice)
	req.ParallelToolCalls, req.Store, req.Include = rr.ParallelToolCalls, rr.Store, rr.Include
	req.PreviousResponseID = rr.PreviousResponseID
	if rr.Text != nil {
		req.Format = rr.Text.Format.format()
	}
	req.Logprobs = slices.Contains(rr.Include, IncludeLogprobs)
	req.TopLogprobs, req.User, req.ServiceTier = rr.TopLogprobs, rr.User, rr.ServiceTier
	req.Metadata = presentJSON(rr.Metadata)
	if rr.Instructions != "" {
		req.Messages = append(req.Messages, Message{Role: RoleSystem, Content: []Part{{Type: PartText, Text: rr.Instructions}}})
	}
	msgs, err := responsesInput(rr.Input)
	if err != nil {
		return Request{}, fmt.Errorf("decode responses request: %w", err)
	}
	req.Messages = append(req.Messages, msgs...)
	for _, t := range rr.Tools {
		if t.Type == "function" {
			req.Tools = append(req.Tools, Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
		}
	}
	return req, nil
}

func (responsesDialect) Overlay(body []byte, model string, s Sampling) (Body, error) {
	return overlaySeedless("responses", body, responsesRequestShape, model, s, "max_output_tokens")
}

type responsesRequest struct {
	Model           string          `json:"model"`
	Instructions    string          `json:"instructions"`
	Input           json.RawMessage `json:"input"`
	Tools           []responsesTool `json:"tools"`
	Temperature     *float64        `json:"temperature"`
	TopP            *float64        `json:"top_p"`
	MaxOutputTokens *int            `json:"max_output_tokens"`
	Stream          bool            `json:"stream"`
	ToolChoice      json.RawMessage `json:"tool_choice"`
	Reasoning       *struct {
		Effort  string `json:"effort"`
		Summary string `json:"summary"`
	} `json:"reasoning"`
	ParallelToolCalls  *bool    `json:"parallel_tool_calls"`
	Store              *bool    `json:"store"`
	Include            []string `json:"include"`
	PreviousResponseID string   `json:"previous_response_id"`
	Text               *struct {
		Format *responsesFormat `json:"format"`
	} `json:"text"`
	TopLogprobs *int            `json:"top_logprobs"`
	User        string          `json:"user"`
	Metadata    json.RawMessage `json:"metadata"`
	ServiceTier string          `json:"service_tier"`
}

// responsesFormat is Responses' text.format.
type responsesFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"`
}

// format is f in the typed vocabulary.
func (f *responsesFormat) format() *Format {
	if f == nil || f.Type == "" {
		return nil
	}
	return &Format{Type: f.Type, Name: f.Name, Description: f.Description, Schema: f.Schema, Strict: f.Strict}
}

type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// responsesItem is any input or output item; only its type's fields are set.
type responsesItem struct {
	Type      string          `json:"type"`
	ID        string          `json:"id,omitempty"`
	Role      string          `json:"role,omitempty"`
	Status    string          `json:"status,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments *string         `json:"arguments,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	Summary   []responsesText `json:"summary,omitempty"`
	Encrypted string          `json:"encrypted_content,omitempty"`
}

type responsesText struct {
	Type     string          `json:"type"`
	Text     string          `json:"text,omitempty"`
	Refusal  string          `json:"refusal,omitempty"`
	ImageURL json.RawMessage `json:"image_url,omitempty"`
}

// The shapes of what ParseRequest reads: Overlay checks a body against
// responsesRequestShape (overlay.go).
var (
	responsesRequestShape = jsonwire.Of(reflect.TypeFor[responsesRequest](),
		jsonwire.Union(reflect.TypeFor[responsesRequest](), "input", reflect.TypeFor[string](), reflect.TypeFor[[]responsesItem]()),
		jsonwire.Hook(reflect.TypeFor[responsesItem](), checkResponsesItem))
	// responsesContentShape is what responsesContent reads.
	responsesContentShape = jsonwire.OneOf([]reflect.Type{reflect.TypeFor[string](), reflect.TypeFor[[]responsesText]()})
)

// checkResponsesItem checks the content responsesInput reads for an item
// of its type.
func checkResponsesItem(o jsonwire.Object) error {
	typ := o.String("type")
	if typ == "" && o.String("role") != "" {
		typ = "message"
	}
	switch typ {
	case "message":
		return o.Check("content", responsesContentShape)
	case "function_call_output":
		return o.Check("output", responsesContentShape)
	case "reasoning":
		// The content is read only when the summary has no text.
		var summary []responsesText
		if raw := o.Raw("summary"); raw != nil {
			_ = jsonwire.Unmarshal(raw, &summary) // its shape is checked already
		}
		for _, s := range summary {
			if s.Text != "" {
				return nil
			}
		}
		return o.Check("content", responsesContentShape)
	}
	return nil
}

func responsesInput(raw json.RawMessage) ([]Message, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] == '"' {
		s, err := jsonwire.UnquoteOwned(raw) // raw is a decoded field
		if err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
		return []Message{{Role: RoleUser, Content: []Part{{Type: PartText, Text: s}}}}, nil
	}
	var items []responsesItem
	if err := jsonwire.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	var out []Message
	var asst *Message
	flush := func() {
		if asst != nil {
			asst.Reasoning = joinReasoning(asst.Thinking)
			out = append(out, *asst)
			asst = nil
		}
	}
	assistant := func() *Message {
		if asst == nil {
			asst = &Message{Role: RoleAssistant}
		}
		return asst
	}
	for i, it := range items {
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		switch typ {
		case "message":
			parts, refusal, err := responsesContent(it.Content)
			if err != nil {
				return nil, fmt.Errorf("input %d: %w", i, err)
			}
			if it.Role == RoleAssistant {
				a := assistant()
				a.Content = append(a.Content, parts...)
				a.Refusal += refusal
				continue
			}
			flush()
			out = append(out, Message{Role: it.Role, Content: parts})
		case "function_call":
			args := ""
			if it.Arguments != nil {
				args = *it.Arguments
			}
			a := assistant()
			a.ToolCalls = append(a.ToolCalls, ToolCall{ID: it.CallID, Name: it.Name, Arguments: args})
		case "reasoning":
			t, err := it.thinking()
			if err != nil {
				return nil, fmt.Errorf("input %d: %w", i, err)
			}
			a := assistant()
			a.Thinking = append(a.Thinking, t)
		case "function_call_output":
			flush()
			parts, _, err := responsesContent(it.Output)
			if err != nil {
				return nil, fmt.Errorf("input %d: output: %w", i, err)
			}
			out = append(out, Message{Role: RoleTool, ToolCallID: it.CallID, Content: parts})
		}
	}
	flush()
	for i := range out {
		if out[i].Role == RoleAssistant {
			if err := unwrapCarried(&out[i]); err != nil {
				return nil, fmt.Errorf("input: %w", err)
			}
		}
	}
	return out, nil
}

// responsesContent reads item content: absent, a string, or parts. Refusal
// parts are returned apart.
func responsesContent(raw json.RawMessage) ([]Part, string, error) {
	return readContent[responsesText](raw)
}

func (p responsesText) part() (part Part, ok bool, refusal string) {
	switch p.Type {
	case "input_text", "output_text", "text", "summary_text", "reasoning_text":
		return Part{Type: PartText, Text: p.Text}, true, ""
	case "input_image":
		var u string
		if jsonwire.Unmarshal(p.ImageURL, &u) == nil && u != "" {
			return Part{Type: PartImage, ImageURL: u}, true, ""
		}
	case "refusal":
		return Part{}, false, p.Refusal
	}
	return Part{}, false, ""
}

func (it responsesItem) thinking() (Thinking, error) {
	t := Thinking{ID: it.ID, Encrypted: it.Encrypted}
	for _, s := range it.Summary {
		t.Text += s.Text
	}
	if t.Text == "" {
		parts, _, err := responsesContent(it.Content)
		if err != nil {
			return Thinking{}, err
		}
		t.Text = textOf(parts)
	}
	return t, nil
}
