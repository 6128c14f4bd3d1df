package dialects

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
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
}

type streamBlock struct {
	b    anthropicBlock
	text strings.Builder // text, thinking or partial tool input JSON
	sig  strings.Builder
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
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil
	}
	var ev anthropicEvent
	if err := unmarshal(data, &ev); err != nil {
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
		case "thinking":
			if sb.b.Thinking != nil {
				sb.text.WriteString(*sb.b.Thinking)
			}
			if sb.b.Signature != nil {
				sb.sig.WriteString(*sb.b.Signature)
			}
		case "tool_use":
			if in := bytes.TrimSpace(sb.b.Input); len(in) > 0 && !bytes.Equal(in, []byte("{}")) {
				sb.text.Write(in)
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
		case "input_json_delta":
			sb.text.WriteString(ev.Delta.PartialJSON)
		case "thinking_delta":
			sb.text.WriteString(ev.Delta.Thinking)
		case "signature_delta":
			sb.sig.WriteString(ev.Delta.Signature)
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

// WriteStream writes message_start, each block's start, deltas and stop,
// message_delta and message_stop.
func (anthropicDialect) WriteStream(w io.Writer, resp Response) error {
	s := &sse{w: w}
	start := anthropicMessageOf(resp, nil)
	start["stop_reason"] = nil
	u := anthropicUsageOf(resp.Usage)
	startUsage := map[string]int{}
	for k, v := range u {
		startUsage[k] = v
	}
	startUsage["output_tokens"] = 0
	start["usage"] = startUsage
	s.event("message_start", map[string]any{"type": "message_start", "message": start})
	for i, b := range anthropicAssistantBlocks(resp.Message, true) {
		delta := func(d map[string]any) {
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		head := b
		switch b.Type {
		case "text":
			head.Text = ""
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, p := range pieces(b.Text, 4) {
				delta(map[string]any{"type": "text_delta", "text": p})
			}
		case "thinking":
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
			for _, p := range pieces(*b.Thinking, 4) {
				delta(map[string]any{"type": "thinking_delta", "thinking": p})
			}
			if *b.Signature != "" {
				delta(map[string]any{"type": "signature_delta", "signature": *b.Signature})
			}
		case "tool_use":
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}})
			for _, p := range pieces(string(b.Input), 3) {
				delta(map[string]any{"type": "input_json_delta", "partial_json": p})
			}
		default:
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": head})
		}
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	s.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": anthropicStopOf(resp), "stop_sequence": nil},
		"usage": u})
	s.event("message_stop", map[string]any{"type": "message_stop"})
	return s.err
}
