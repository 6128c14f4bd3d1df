package dialects

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

// NewStream returns an empty *AnthropicStream.
func (anthropicDialect) NewStream() Stream { return &AnthropicStream{} }

// AnthropicStream assembles a streamed Message (message_start,
// content_block_*, message_delta, message_stop) into a Response. The zero
// value is ready to use.
type AnthropicStream struct {
	msg    anthropicResponse
	blocks []*streamBlock
	done   bool
	// thinking and tools count the blocks of each kind started: an
	// Event's Index.
	thinking, tools int
	events          []Event
}

type streamBlock struct {
	b    anthropicBlock
	text strings.Builder // text, thinking or partial tool input JSON
	sig  strings.Builder
	key  int // the Event Index of a thinking or tool_use block
}

type anthropicEvent struct {
	Type         string             `json:"type"`
	Message      *anthropicResponse `json:"message"`
	Index        int                `json:"index"`
	ContentBlock *anthropicBlock    `json:"content_block"`
	Delta        *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *anthropicUsage `json:"usage"`
}

// Add consumes one event's data. An error event is returned as an *AnthropicError.
func (s *AnthropicStream) Add(data []byte) error {
	s.events = s.events[:0]
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil
	}
	var ev anthropicEvent
	if err := jsonwire.Unmarshal(data, &ev); err != nil {
		return fmt.Errorf("decode anthropic event: %w", err)
	}
	switch ev.Type {
	case "error":
		return anthropicDialect{}.ParseError(0, data)
	case "message_start":
		if ev.Message != nil {
			s.msg = *ev.Message
			s.msg.Content = nil
		}
		s.events = append(s.events, Event{Type: EventStart, Response: anthropicResponseOf(s.msg)})
	case "content_block_start":
		if ev.ContentBlock == nil || ev.Index < 0 || ev.Index > len(s.blocks)+1024 {
			return fmt.Errorf("decode anthropic event: bad content_block_start")
		}
		for len(s.blocks) <= ev.Index {
			s.blocks = append(s.blocks, nil)
		}
		sb := &streamBlock{b: *ev.ContentBlock}
		switch sb.b.Type {
		case "text":
			sb.text.WriteString(sb.b.Text)
			s.emit(Event{Type: EventText, Delta: sb.b.Text})
		case "thinking":
			sb.key = s.thinking
			s.thinking++
			if sb.b.Thinking != nil {
				sb.text.WriteString(*sb.b.Thinking)
				s.emit(Event{Type: EventThinking, Index: sb.key, Delta: *sb.b.Thinking})
			}
			if sb.b.Signature != nil {
				sb.sig.WriteString(*sb.b.Signature)
			}
		case "redacted_thinking":
			sb.key = s.thinking
			s.thinking++
			s.emit(Event{Type: EventThinkingDone, Index: sb.key, Thinking: Thinking{Redacted: sb.b.Data}})
		case "tool_use":
			sb.key = s.tools
			s.tools++
			s.emit(Event{Type: EventToolCall, Index: sb.key, ToolCall: ToolCall{ID: sb.b.ID, Name: sb.b.Name}})
			if in := bytes.TrimSpace(sb.b.Input); len(in) > 0 && !bytes.Equal(in, []byte("{}")) {
				sb.text.Write(in)
				s.emit(Event{Type: EventToolArgs, Index: sb.key, Delta: string(in)})
			}
		}
		s.blocks[ev.Index] = sb
	case "content_block_delta":
		if ev.Delta == nil || ev.Index < 0 || ev.Index >= len(s.blocks) || s.blocks[ev.Index] == nil {
			return fmt.Errorf("decode anthropic event: delta for unknown block %d", ev.Index)
		}
		sb := s.blocks[ev.Index]
		switch ev.Delta.Type {
		case "text_delta":
			sb.text.WriteString(ev.Delta.Text)
			s.emit(Event{Type: EventText, Delta: ev.Delta.Text})
		case "input_json_delta":
			sb.text.WriteString(ev.Delta.PartialJSON)
			s.emit(Event{Type: EventToolArgs, Index: sb.key, Delta: ev.Delta.PartialJSON})
		case "thinking_delta":
			sb.text.WriteString(ev.Delta.Thinking)
			s.emit(Event{Type: EventThinking, Index: sb.key, Delta: ev.Delta.Thinking})
		case "signature_delta":
			sb.sig.WriteString(ev.Delta.Signature)
		}
	case "content_block_stop":
		if ev.Index >= 0 && ev.Index < len(s.blocks) && s.blocks[ev.Index] != nil && s.blocks[ev.Index].b.Type == "thinking" {
			sb := s.blocks[ev.Index]
			s.emit(Event{Type: EventThinkingDone, Index: sb.key, Thinking: Thinking{Text: sb.text.String(), Signature: sb.sig.String()}})
		}
	case "message_delta":
		if ev.Delta != nil && ev.Delta.StopReason != "" {
			s.msg.StopReason = ev.Delta.StopReason
		}
		if ev.Usage != nil {
			// message_delta's usage is cumulative; input counts may be absent (0).
			if ev.Usage.InputTokens > 0 {
				s.msg.Usage.InputTokens = ev.Usage.InputTokens
			}
			if ev.Usage.CacheReadInputTokens > 0 {
				s.msg.Usage.CacheReadInputTokens = ev.Usage.CacheReadInputTokens
			}
			if ev.Usage.CacheCreationInputTokens > 0 {
				s.msg.Usage.CacheCreationInputTokens = ev.Usage.CacheCreationInputTokens
			}
			s.msg.Usage.OutputTokens = ev.Usage.OutputTokens
		}
	case "message_stop":
		s.done = true
	}
	return nil
}

// emit notes an event of the last Add.
func (s *AnthropicStream) emit(ev Event) { s.events = addEvent(s.events, ev) }

// Events is what the last Add made known.
func (s *AnthropicStream) Events() []Event { return s.events }

// Done reports whether message_stop was seen.
func (s *AnthropicStream) Done() bool { return s.done }

// Response returns what was assembled so far.
func (s *AnthropicStream) Response() Response {
	msg := s.msg
	msg.Content = nil
	for _, sb := range s.blocks {
		if sb == nil {
			continue
		}
		b := sb.b
		switch b.Type {
		case "text":
			b.Text = sb.text.String()
		case "thinking":
			t, sig := sb.text.String(), sb.sig.String()
			b.Thinking, b.Signature = &t, &sig
		case "tool_use":
			b.Input = json.RawMessage(sb.text.String())
		}
		msg.Content = append(msg.Content, b)
	}
	return anthropicResponseOf(msg)
}
