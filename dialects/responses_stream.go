package dialects

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

// NewStream returns an empty *ResponsesStream.
func (responsesDialect) NewStream() Stream { return &ResponsesStream{} }

// ResponsesStream assembles a streamed Response from its events: the
// terminal response.completed (or .incomplete, .failed) carries the whole
// object; output items and deltas seen before it stand in when it never
// comes. The zero value is ready to use.
type ResponsesStream struct {
	resp    responsesResponse
	items   []*responsesStreamItem
	done    bool
	started bool
	events  []Event
}

type responsesStreamItem struct {
	item responsesItem
	text strings.Builder
	args strings.Builder
	done bool
	// called says whether the item's tool call was made known (an
	// EventToolCall).
	called bool
}

type responsesEvent struct {
	Type        string             `json:"type"`
	Response    *responsesResponse `json:"response"`
	OutputIndex int                `json:"output_index"`
	Item        *responsesItem     `json:"item"`
	Delta       string             `json:"delta"`
	Logprobs    []TokenLogprob     `json:"logprobs"`
	Code        string             `json:"code"`
	Message     string             `json:"message"`
}

// Add consumes one event's data. An error event is returned as a *ChatError.
func (s *ResponsesStream) Add(data []byte) error {
	s.events = s.events[:0]
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil
	}
	var ev responsesEvent
	if err := jsonwire.Unmarshal(data, &ev); err != nil {
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
		s.start()
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
		s.itemEvents(ev.OutputIndex, it)
	case "response.output_text.delta", "response.reasoning_summary_text.delta", "response.refusal.delta":
		it, err := item()
		if err != nil {
			return err
		}
		it.text.WriteString(ev.Delta)
		switch ev.Type {
		case "response.output_text.delta":
			s.emit(Event{Type: EventText, Delta: ev.Delta, Logprobs: ev.Logprobs})
		case "response.refusal.delta":
			s.emit(Event{Type: EventRefusal, Delta: ev.Delta})
		default:
			s.emit(Event{Type: EventThinking, Index: ev.OutputIndex, Delta: ev.Delta, Thinking: Thinking{ID: it.item.ID}})
		}
	case "response.function_call_arguments.delta":
		it, err := item()
		if err != nil {
			return err
		}
		s.call(ev.OutputIndex, it)
		it.args.WriteString(ev.Delta)
		s.emit(Event{Type: EventToolArgs, Index: ev.OutputIndex, Delta: ev.Delta})
	}
	return nil
}

// start makes the response known, once.
func (s *ResponsesStream) start() {
	if s.started {
		return
	}
	s.started = true
	s.emit(Event{Type: EventStart, Response: Response{ID: s.resp.ID, Model: s.resp.Model}})
}

// itemEvents makes known what an item added or done says: a tool call,
// the arguments of one that came whole, a reasoning item's state.
func (s *ResponsesStream) itemEvents(index int, it *responsesStreamItem) {
	s.start()
	switch it.item.Type {
	case "function_call":
		s.call(index, it)
		if it.done && it.args.Len() == 0 && it.item.Arguments != nil {
			s.emit(Event{Type: EventToolArgs, Index: index, Delta: *it.item.Arguments})
		}
	case "reasoning":
		if it.done {
			t, err := it.item.thinking()
			if err == nil {
				s.emit(Event{Type: EventThinkingDone, Index: index, Thinking: t})
			}
		}
	}
}

// call makes a function call item known, once.
func (s *ResponsesStream) call(index int, it *responsesStreamItem) {
	if !it.called {
		it.called = true
		s.emit(Event{Type: EventToolCall, Index: index, ToolCall: ToolCall{ID: it.item.CallID, Name: it.item.Name}})
	}
}

// emit notes an event of the last Add.
func (s *ResponsesStream) emit(ev Event) { s.events = addEvent(s.events, ev) }

// Events is what the last Add made known.
func (s *ResponsesStream) Events() []Event { return s.events }

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
