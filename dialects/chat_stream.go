package dialects

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
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
	done      bool
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
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatUsage      `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// Add consumes the data of one SSE event: a chat.completion.chunk object or
// the final [DONE]. An error object in the stream is returned as a *ChatError.
func (s *ChatStream) Add(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil
	}
	if bytes.Equal(data, []byte("[DONE]")) {
		s.done = true
		return nil
	}
	var c chatChunk
	if err := unmarshal(data, &c); err != nil {
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
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		d := ch.Delta
		if d.Role != "" {
			s.resp.Message.Role = d.Role
		}
		if d.Content != nil {
			s.content.WriteString(*d.Content)
		}
		if d.ReasoningContent != nil {
			s.reasoning.WriteString(*d.ReasoningContent)
		} else if d.Reasoning != nil {
			s.reasoning.WriteString(*d.Reasoning)
		}
		if d.Refusal != nil {
			s.refusal.WriteString(*d.Refusal)
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
				call = &chatStreamCall{}
				s.calls[idx] = call
			}
			if tc.ID != "" {
				call.id = tc.ID
			}
			if tc.Function.Name != "" {
				call.name = tc.Function.Name
			}
			call.args.WriteString(tc.Function.Arguments)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.resp.FinishReason = *ch.FinishReason
		}
	}
	return nil
}

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

// WriteStream writes chat.completion.chunk events and [DONE]. Usage rides
// on the chunk with the finish reason.
func (chatDialect) WriteStream(w io.Writer, resp Response) error {
	type delta struct {
		Role             string            `json:"role,omitempty"`
		Content          *string           `json:"content,omitempty"`
		ReasoningContent *string           `json:"reasoning_content,omitempty"`
		ReasoningDetails json.RawMessage   `json:"reasoning_details,omitempty"`
		Refusal          *string           `json:"refusal,omitempty"`
		ToolCalls        []chatOutToolCall `json:"tool_calls,omitempty"`
	}
	id := orDefault(resp.ID, "chatcmpl-evalflow")
	s := &sse{w: w}
	chunk := func(d delta, finish *string, u *chatOutUsage) {
		c := map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": 0, "model": resp.Model,
			"choices": []any{map[string]any{"index": 0, "delta": d, "finish_reason": finish, "logprobs": nil}},
		}
		if u != nil {
			c["usage"] = u
		}
		s.event("", c)
	}
	empty := ""
	chunk(delta{Role: RoleAssistant, Content: &empty}, nil, nil)
	for _, p := range pieces(reasoningText(resp.Message), 4) {
		chunk(delta{ReasoningContent: &p}, nil, nil)
	}
	if d := chatReasoningDetails(resp.Message); d != nil {
		chunk(delta{ReasoningDetails: d}, nil, nil)
	}
	for _, p := range pieces(textOf(resp.Message.Content), 4) {
		chunk(delta{Content: &p}, nil, nil)
	}
	for _, p := range pieces(resp.Message.Refusal, 2) {
		chunk(delta{Refusal: &p}, nil, nil)
	}
	for i, tc := range resp.Message.ToolCalls {
		var head chatOutToolCall
		head.Index, head.ID, head.Type = &i, tc.ID, "function"
		head.Function.Name = tc.Name
		chunk(delta{ToolCalls: []chatOutToolCall{head}}, nil, nil)
		args := tc.Arguments
		if args == "" {
			args = "{}"
		}
		for _, p := range pieces(args, 3) {
			var part chatOutToolCall
			part.Index = &i
			part.Function.Arguments = p
			chunk(delta{ToolCalls: []chatOutToolCall{part}}, nil, nil)
		}
	}
	finish := orDefault(resp.FinishReason, FinishStop)
	chunk(delta{}, &finish, chatOutUsageOf(resp.Usage))
	s.raw("", []byte("[DONE]"))
	return s.err
}
