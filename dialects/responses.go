package dialects

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// responsesDialect is the OpenAI Responses API.
type responsesDialect struct{}

var _ Dialect = responsesDialect{}

func (responsesDialect) Name() string { return NameResponses }
func (responsesDialect) Path() string { return "/responses" }

func (responsesDialect) Secret(h http.Header) string { return chatDialect{}.Secret(h) }

func (responsesDialect) ParseError(status int, body []byte) error {
	return ParseChatError(status, body)
}

func (responsesDialect) WriteError(w http.ResponseWriter, status int, code, message string) {
	chatDialect{}.WriteError(w, status, code, message)
}

func (responsesDialect) StreamError(message string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "error", "code": ErrorTypeServer, "message": message, "param": nil, "sequence_number": 0})
	return []byte("event: error\ndata: " + string(b) + "\n\n")
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
		Effort string `json:"effort"`
	} `json:"reasoning"`
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

type responsesUsage struct {
	InputTokens        int `json:"input_tokens"`
	OutputTokens       int `json:"output_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

type responsesResponse struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Status            string          `json:"status"`
	Model             string          `json:"model"`
	Output            []responsesItem `json:"output"`
	Usage             *responsesUsage `json:"usage"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// responsesContent reads item content: absent, a string, or parts. Refusal
// parts are returned apart.
func responsesContent(raw json.RawMessage) ([]Part, string, error) {
	raw = bytes.TrimSpace(raw)
	if parts, ok, err := scalarContent(raw); ok {
		return parts, "", err
	}
	var ps []responsesText
	if err := unmarshal(raw, &ps); err != nil {
		return nil, "", fmt.Errorf("content: %w", err)
	}
	var parts []Part
	var refusal string
	for _, p := range ps {
		switch p.Type {
		case "input_text", "output_text", "text", "summary_text", "reasoning_text":
			parts = append(parts, Part{Type: PartText, Text: p.Text})
		case "input_image":
			var u string
			if unmarshal(p.ImageURL, &u) == nil && u != "" {
				parts = append(parts, Part{Type: PartImage, ImageURL: u})
			}
		case "refusal":
			refusal += p.Refusal
		}
	}
	return parts, refusal, nil
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

// ParseRequest reads a Responses request. instructions become a leading
// system message; each run of assistant-side items (reasoning, assistant
// messages, function calls) folds into one assistant message.
func (responsesDialect) ParseRequest(body []byte) (Request, error) {
	var rr responsesRequest
	if err := unmarshal(body, &rr); err != nil {
		return Request{}, fmt.Errorf("decode responses request: %w", err)
	}
	req := Request{Model: rr.Model, Stream: rr.Stream,
		Sampling: Sampling{Temperature: rr.Temperature, TopP: rr.TopP, MaxTokens: rr.MaxOutputTokens}}
	if rr.Reasoning != nil {
		req.Reasoning = &ReasoningConfig{Effort: rr.Reasoning.Effort}
	}
	req.ToolChoice = openAIToolChoice(rr.ToolChoice)
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

func responsesInput(raw json.RawMessage) ([]Message, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] == '"' {
		s, err := unquote(raw)
		if err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
		return []Message{{Role: RoleUser, Content: []Part{{Type: PartText, Text: s}}}}, nil
	}
	var items []responsesItem
	if err := unmarshal(raw, &items); err != nil {
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
	return out, nil
}

// ParseResponse reads a Response object. A failed response is an error.
func (responsesDialect) ParseResponse(body []byte) (Response, error) {
	var rr responsesResponse
	if err := unmarshal(body, &rr); err != nil {
		return Response{}, fmt.Errorf("decode responses response: %w", err)
	}
	return responsesResponseOf(rr)
}

func responsesResponseOf(rr responsesResponse) (Response, error) {
	if rr.Status == "failed" && rr.Error != nil {
		return Response{}, &ChatError{Type: rr.Error.Code, Message: rr.Error.Message}
	}
	r := Response{ID: rr.ID, Model: rr.Model, Message: Message{Role: RoleAssistant}}
	for _, it := range rr.Output {
		switch it.Type {
		case "message":
			parts, refusal, err := responsesContent(it.Content)
			if err != nil {
				return Response{}, fmt.Errorf("decode responses response: %w", err)
			}
			r.Message.Content = append(r.Message.Content, parts...)
			r.Message.Refusal += refusal
		case "function_call":
			args := ""
			if it.Arguments != nil {
				args = *it.Arguments
			}
			r.Message.ToolCalls = append(r.Message.ToolCalls, ToolCall{ID: it.CallID, Name: it.Name, Arguments: args})
		case "reasoning":
			t, err := it.thinking()
			if err != nil {
				return Response{}, fmt.Errorf("decode responses response: %w", err)
			}
			r.Message.Thinking = append(r.Message.Thinking, t)
		}
	}
	r.Message.Reasoning = joinReasoning(r.Message.Thinking)
	switch {
	case rr.Status == "incomplete" && rr.IncompleteDetails != nil && rr.IncompleteDetails.Reason == "content_filter":
		r.FinishReason = FinishContentFilter
	case rr.Status == "incomplete":
		r.FinishReason = FinishLength
	case len(r.Message.ToolCalls) > 0:
		r.FinishReason = FinishToolCalls
	case r.Message.Refusal != "":
		r.FinishReason = FinishContentFilter
	case rr.Status != "":
		r.FinishReason = FinishStop
	}
	if u := rr.Usage; u != nil {
		r.Usage = Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheReadTokens: u.InputTokensDetails.CachedTokens, ReasoningTokens: u.OutputTokensDetails.ReasoningTokens}
	}
	return r, nil
}

// ResponsesStream assembles a streamed Response from its events: the
// terminal response.completed (or .incomplete, .failed) carries the whole
// object; output items and deltas seen before it stand in when it never
// comes. The zero value is ready to use.
type ResponsesStream struct {
	resp  responsesResponse
	items []*responsesStreamItem
	done  bool
}

type responsesStreamItem struct {
	item responsesItem
	text strings.Builder
	args strings.Builder
	done bool
}

type responsesEvent struct {
	Type        string             `json:"type"`
	Response    *responsesResponse `json:"response"`
	OutputIndex int                `json:"output_index"`
	Item        *responsesItem     `json:"item"`
	Delta       string             `json:"delta"`
	Code        string             `json:"code"`
	Message     string             `json:"message"`
}

// Add consumes one event's data. An error event is returned as a *ChatError.
func (s *ResponsesStream) Add(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil
	}
	var ev responsesEvent
	if err := unmarshal(data, &ev); err != nil {
		return fmt.Errorf("decode responses event: %w", err)
	}
	item := func() (*responsesStreamItem, error) {
		if ev.OutputIndex < 0 || ev.OutputIndex > len(s.items)+1024 {
			return nil, fmt.Errorf("decode responses event: bad output_index %d", ev.OutputIndex)
		}
		for len(s.items) <= ev.OutputIndex {
			s.items = append(s.items, &responsesStreamItem{})
		}
		return s.items[ev.OutputIndex], nil
	}
	switch ev.Type {
	case "error":
		return &ChatError{Type: ev.Code, Message: ev.Message}
	case "response.created", "response.in_progress":
		if ev.Response != nil {
			s.resp = *ev.Response
		}
	case "response.completed", "response.incomplete", "response.failed":
		if ev.Response != nil {
			s.resp = *ev.Response
		}
		s.done = true
		if ev.Type == "response.failed" && s.resp.Error != nil {
			return &ChatError{Type: s.resp.Error.Code, Message: s.resp.Error.Message}
		}
	case "response.output_item.added", "response.output_item.done":
		it, err := item()
		if err != nil {
			return err
		}
		if ev.Item != nil {
			it.item = *ev.Item
		}
		it.done = ev.Type == "response.output_item.done"
	case "response.output_text.delta", "response.reasoning_summary_text.delta", "response.refusal.delta":
		it, err := item()
		if err != nil {
			return err
		}
		it.text.WriteString(ev.Delta)
	case "response.function_call_arguments.delta":
		it, err := item()
		if err != nil {
			return err
		}
		it.args.WriteString(ev.Delta)
	}
	return nil
}

// Done reports whether a terminal event was seen.
func (s *ResponsesStream) Done() bool { return s.done }

// Response returns what was assembled so far.
func (s *ResponsesStream) Response() Response {
	rr := s.resp
	if len(rr.Output) == 0 {
		for _, it := range s.items {
			item := it.item
			if !it.done {
				switch item.Type {
				case "message":
					text, _ := json.Marshal([]responsesText{{Type: "output_text", Text: it.text.String()}})
					item.Content = text
				case "function_call":
					args := it.args.String()
					item.Arguments = &args
				case "reasoning":
					item.Summary = []responsesText{{Type: "summary_text", Text: it.text.String()}}
				}
			}
			rr.Output = append(rr.Output, item)
		}
	}
	r, err := responsesResponseOf(rr)
	if err != nil {
		return Response{ID: rr.ID, Model: rr.Model, Message: Message{Role: RoleAssistant}}
	}
	return r
}

// NewStream returns an empty *ResponsesStream.
func (responsesDialect) NewStream() Stream { return &ResponsesStream{} }
