package dialects

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// NewStream returns an empty *ResponsesStream.
func (responsesDialect) NewStream() Stream { return &ResponsesStream{} }

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

// WriteStream writes response.created … response.completed, each output
// item added, streamed in deltas, and done.
func (responsesDialect) WriteStream(w io.Writer, resp Response) error {
	s := &sse{w: w}
	seq := 0
	emit := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		s.event(typ, fields)
	}
	output := responsesOutput(resp)
	emit("response.created", map[string]any{"response": responsesObject(resp, "in_progress", []map[string]any{})})
	emit("response.in_progress", map[string]any{"response": responsesObject(resp, "in_progress", []map[string]any{})})
	for i, item := range output {
		id, _ := item["id"].(string)
		added := map[string]any{}
		for k, v := range item {
			added[k] = v
		}
		switch item["type"] {
		case "reasoning":
			added["summary"] = []any{}
			emit("response.output_item.added", map[string]any{"output_index": i, "item": added})
			for si, sum := range item["summary"].([]map[string]any) {
				text := sum["text"].(string)
				base := func() map[string]any {
					return map[string]any{"item_id": id, "output_index": i, "summary_index": si}
				}
				f := base()
				f["part"] = map[string]any{"type": "summary_text", "text": ""}
				emit("response.reasoning_summary_part.added", f)
				for _, p := range pieces(text, 4) {
					f := base()
					f["delta"] = p
					emit("response.reasoning_summary_text.delta", f)
				}
				f = base()
				f["text"] = text
				emit("response.reasoning_summary_text.done", f)
				f = base()
				f["part"] = map[string]any{"type": "summary_text", "text": text}
				emit("response.reasoning_summary_part.done", f)
			}
		case "message":
			added["content"] = []any{}
			added["status"] = "in_progress"
			emit("response.output_item.added", map[string]any{"output_index": i, "item": added})
			for ci, part := range item["content"].([]map[string]any) {
				base := func() map[string]any {
					return map[string]any{"item_id": id, "output_index": i, "content_index": ci}
				}
				f := base()
				if part["type"] == "refusal" {
					refusal := part["refusal"].(string)
					f["part"] = map[string]any{"type": "refusal", "refusal": ""}
					emit("response.content_part.added", f)
					for _, p := range pieces(refusal, 2) {
						f := base()
						f["delta"] = p
						emit("response.refusal.delta", f)
					}
					f = base()
					f["refusal"] = refusal
					emit("response.refusal.done", f)
				} else {
					text := part["text"].(string)
					f["part"] = map[string]any{"type": "output_text", "text": "", "annotations": []any{}, "logprobs": []any{}}
					emit("response.content_part.added", f)
					for _, p := range pieces(text, 4) {
						f := base()
						f["delta"] = p
						f["logprobs"] = []any{}
						emit("response.output_text.delta", f)
					}
					f = base()
					f["text"] = text
					f["logprobs"] = []any{}
					emit("response.output_text.done", f)
				}
				f = base()
				f["part"] = part
				emit("response.content_part.done", f)
			}
		case "function_call":
			args := item["arguments"].(string)
			added["arguments"] = ""
			added["status"] = "in_progress"
			emit("response.output_item.added", map[string]any{"output_index": i, "item": added})
			for _, p := range pieces(args, 3) {
				emit("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": p})
			}
			emit("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i, "arguments": args, "name": item["name"]})
		}
		emit("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	final := responsesObject(resp, "completed", output)
	typ := "response.completed"
	if final["status"] == "incomplete" {
		typ = "response.incomplete"
	}
	emit(typ, map[string]any{"response": final})
	return s.err
}
