package dialects

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

func (chatDialect) NewStream() Stream { return &ChatStream{} }

// ChatStream assembles a streamed chat completion, one SSE event's data at a
// time, into a Response. Only the first choice is kept. The zero value is
// ready to use.
type ChatStream struct {
	resp      Response
	content   strings.Builder
	reasoning strings.Builder
	refusal   strings.Builder
	calls     map[int]*chatStreamCall
	// details are the reasoning_details entries of the deltas, in order.
	details  []json.RawMessage
	logprobs []TokenLogprob
	done     bool
	started  bool
	events   []Event
}

type chatStreamCall struct {
	id, name string
	args     strings.Builder
}

type chatChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role             string         `json:"role"`
			Content          *string        `json:"content"`
			ReasoningContent *string        `json:"reasoning_content"`
			Reasoning        *string        `json:"reasoning"`
			Refusal          *string        `json:"refusal"`
			ToolCalls        []chatToolCall `json:"tool_calls"`
			// ReasoningDetails are OpenRouter-style state entries.
			ReasoningDetails []json.RawMessage `json:"reasoning_details"`
		} `json:"delta"`
		FinishReason *string       `json:"finish_reason"`
		Logprobs     *chatLogprobs `json:"logprobs"`
	} `json:"choices"`
	Usage *chatUsage      `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// Add consumes the data of one SSE event: a chat.completion.chunk object or
// the final [DONE]. An error object in the stream is returned as a *ChatError.
func (s *ChatStream) Add(data []byte) error {
	s.events = s.events[:0]
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil
	}
	if bytes.Equal(data, []byte("[DONE]")) {
		s.done = true
		return nil
	}
	var c chatChunk
	if err := jsonwire.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("decode chat chunk: %w", err)
	}
	if len(c.Error) > 0 && !bytes.Equal(c.Error, []byte("null")) {
		return ParseChatError(0, data)
	}
	if c.ID != "" {
		s.resp.ID = c.ID
	}
	if c.Model != "" {
		s.resp.Model = c.Model
	}
	if c.Usage != nil {
		s.resp.Usage = c.Usage.usage()
	}
	if !s.started {
		s.started = true
		s.emit(Event{Type: EventStart, Response: Response{ID: s.resp.ID, Model: s.resp.Model, Usage: s.resp.Usage}})
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		d := ch.Delta
		if d.Role != "" {
			s.resp.Message.Role = d.Role
		}
		if r := d.ReasoningContent; r != nil || d.Reasoning != nil {
			if r == nil {
				r = d.Reasoning
			}
			s.reasoning.WriteString(*r)
			s.emit(Event{Type: EventThinking, Delta: *r})
		}
		for _, e := range d.ReasoningDetails {
			s.details = append(s.details, append(json.RawMessage(nil), e...))
		}
		if d.Content != nil {
			s.content.WriteString(*d.Content)
			lp := ch.Logprobs.content()
			s.logprobs = append(s.logprobs, lp...)
			s.emit(Event{Type: EventText, Delta: *d.Content, Logprobs: lp})
		}
		if d.Refusal != nil {
			s.refusal.WriteString(*d.Refusal)
			s.emit(Event{Type: EventRefusal, Delta: *d.Refusal})
		}
		for i, tc := range d.ToolCalls {
			idx := i
			if tc.Index != nil {
				idx = *tc.Index
			}
			if s.calls == nil {
				s.calls = make(map[int]*chatStreamCall)
			}
			call := s.calls[idx]
			if call == nil {
				call = &chatStreamCall{id: tc.ID, name: tc.Function.Name}
				s.calls[idx] = call
				s.emit(Event{Type: EventToolCall, Index: idx, ToolCall: ToolCall{ID: tc.ID, Name: tc.Function.Name}})
			}
			if tc.ID != "" {
				call.id = tc.ID
			}
			if tc.Function.Name != "" {
				call.name = tc.Function.Name
			}
			call.args.WriteString(tc.Function.Arguments)
			s.emit(Event{Type: EventToolArgs, Index: idx, Delta: tc.Function.Arguments})
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.resp.FinishReason = *ch.FinishReason
		}
	}
	return nil
}

// emit notes an event of the last Add.
func (s *ChatStream) emit(ev Event) { s.events = addEvent(s.events, ev) }

// Events is what the last Add made known.
func (s *ChatStream) Events() []Event { return s.events }

// Done reports whether [DONE] was seen.
func (s *ChatStream) Done() bool { return s.done }

// Response returns what was assembled so far.
func (s *ChatStream) Response() Response {
	r := s.resp
	if r.Message.Role == "" {
		r.Message.Role = RoleAssistant
	}
	if s.content.Len() > 0 {
		r.Message.Content = []Part{{Type: PartText, Text: s.content.String()}}
	}
	r.Message.Reasoning = s.reasoning.String()
	r.Message.Refusal = s.refusal.String()
	r.Logprobs = s.logprobs
	if len(s.details) > 0 {
		raw, err := json.Marshal(s.details)
		if err == nil {
			r.Message.ReasoningDetails = raw
			r.Message.Thinking = thinkingOfDetails(raw)
		}
	}
	idx := make([]int, 0, len(s.calls))
	for i := range s.calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		c := s.calls[i]
		r.Message.ToolCalls = append(r.Message.ToolCalls, ToolCall{ID: c.id, Name: c.name, Arguments: c.args.String()})
	}
	return r
}
