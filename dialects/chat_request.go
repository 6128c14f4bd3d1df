package dialects

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

func (chatDialect) ParseRequest(body []byte) (Request, error) { return ParseChatRequest(body) }

func (chatDialect) Overlay(body []byte, model string, s Sampling) (Body, error) {
	return overlayChat(body, model, s)
}

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
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	ResponseFormat      *chatFormat     `json:"response_format"`
	N                   *int            `json:"n"`
	Logprobs            *bool           `json:"logprobs"`
	TopLogprobs         *int            `json:"top_logprobs"`
	User                string          `json:"user"`
	Metadata            json.RawMessage `json:"metadata"`
	ServiceTier         string          `json:"service_tier"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// chatFormat is chat's response_format.
type chatFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	} `json:"json_schema"`
}

// format is f in the typed vocabulary.
func (f *chatFormat) format() *Format {
	if f == nil || f.Type == "" {
		return nil
	}
	out := &Format{Type: f.Type}
	if s := f.JSONSchema; s != nil {
		out.Name, out.Description, out.Schema, out.Strict = s.Name, s.Description, s.Schema, s.Strict
	}
	return out
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

// chatRequestShape is what ParseChatRequest reads: Overlay checks a body
// against it (overlay.go).
var chatRequestShape = jsonwire.Of(reflect.TypeFor[chatRequest](),
	jsonwire.Union(reflect.TypeFor[chatMessage](), "content", reflect.TypeFor[string](), reflect.TypeFor[[]chatPart]()))

// ParseChatRequest reads a chat completions request body into the typed
// vocabulary. Content parts it has no type for (audio, files) are skipped.
func ParseChatRequest(body []byte) (Request, error) {
	var cr chatRequest
	if err := jsonwire.UnmarshalOwned(body, &cr); err != nil {
		return Request{}, fmt.Errorf("decode chat request: %w", err)
	}
	req := Request{
		Model:  cr.Model,
		Stream: cr.Stream,
		From:   NameChat,
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
	req.ParallelToolCalls = cr.ParallelToolCalls
	req.Format = cr.ResponseFormat.format()
	if cr.N != nil {
		req.N = *cr.N
	}
	req.Logprobs = cr.Logprobs != nil && *cr.Logprobs
	req.TopLogprobs, req.User, req.ServiceTier = cr.TopLogprobs, cr.User, cr.ServiceTier
	req.Metadata = presentJSON(cr.Metadata)
	req.StreamUsage = cr.StreamOptions != nil && cr.StreamOptions.IncludeUsage
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
		m.Thinking = thinkingOfDetails(m.ReasoningDetails)
		if m.Reasoning == "" {
			m.Reasoning = joinReasoning(m.Thinking)
		}
	}
	for _, tc := range cm.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return m, nil
}

// parseChatContent reads message content: a string, an array of parts, or
// null. Refusal parts (assistant messages) are returned apart.
func parseChatContent(raw json.RawMessage) ([]Part, string, error) {
	return readContent[chatPart](raw)
}

func (p chatPart) part() (part Part, ok bool, refusal string) {
	switch {
	case p.Type == "text":
		return Part{Type: PartText, Text: p.Text}, true, ""
	case p.Type == "image_url" && p.ImageURL != nil:
		return Part{Type: PartImage, ImageURL: p.ImageURL.URL}, true, ""
	case p.Type == "refusal":
		return Part{}, false, p.Refusal
	}
	return Part{}, false, ""
}

// stopOf reads chat's stop: a string or an array of strings.
func stopOf(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil // absent: most requests; decoding nothing only builds an error
	}
	var one string
	if jsonwire.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil
		}
		return []string{one}
	}
	var many []string
	_ = jsonwire.Unmarshal(raw, &many)
	return many
}

// OverlayChat checks a chat completions request body (valid JSON, of the
// shape ParseChatRequest reads) and sets model and the sampling fields s
// sets on it, keeping every other byte as the caller sent it: unknown
// fields, key order, whitespace and the messages array are untouched. A
// max-tokens limit goes into max_completion_tokens when the caller used that
// name, into max_tokens otherwise.
func OverlayChat(body []byte, model string, s Sampling) ([]byte, error) {
	out, err := overlayChat(body, model, s)
	if err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// overlayChat is OverlayChat keeping the caller's bytes in place.
func overlayChat(body []byte, model string, s Sampling) (Body, error) {
	maxTokens := func(has func(string) bool) []string {
		hasNew, hasOld := has("max_completion_tokens"), has("max_tokens")
		var names []string
		if hasNew {
			names = append(names, "max_completion_tokens")
		}
		if hasOld || !hasNew {
			names = append(names, "max_tokens")
		}
		return names
	}
	return overlay(NameChat, body, chatRequestShape, model, s, maxTokens, true)
}
