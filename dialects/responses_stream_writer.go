package dialects

import (
	"fmt"
	"io"
	"strings"
)

// NewStreamWriter returns a writer of Responses stream events.
func (responsesDialect) NewStreamWriter(w io.Writer) StreamWriter {
	return &responsesStreamWriter{s: sse{w: w}, open: -1}
}

// WriteStream writes response.created … response.completed, each output
// item added, streamed in deltas, and done.
func (d responsesDialect) WriteStream(w io.Writer, resp Response) error {
	return writeStream(d.NewStreamWriter(w), resp)
}

// responsesStreamWriter writes Responses stream events as the answer's
// events arrive. Output items are numbered in the order they open and
// done when the next one opens; response.completed lists them as they
// were streamed.
type responsesStreamWriter struct {
	s       sse
	seq     int
	started bool
	resp    Response // ID and Model, from EventStart
	// items are the output items by output_index, each whole once done.
	items []map[string]any
	open  int // the open item's output_index, or -1
	// openKind and openKey say what the open item holds: "message", or
	// "reasoning" or "function_call" with the Event Index.
	openKind string
	openKey  int

	// The open message item: its content parts done, and the open one.
	parts        []map[string]any
	partKind     string // "output_text" or "refusal", or "" when none is open
	partText     strings.Builder
	partLogprobs []TokenLogprob
	// The open reasoning item: its id and text so far.
	reasoningID string
	reasoning   strings.Builder
	summaryOpen bool
	thinkingN   int // reasoning items opened
	// carried says the answer's reasoning went as one item carrying a
	// chat upstream's reasoning_details; its own thinking events are not
	// written.
	carried bool
	// calls are the function call items, by Event Index; pending, the ones
	// opened before the open one and not done yet: calls stay open
	// together while only calls open, so that an upstream interleaving
	// their arguments (chat numbers its calls, and may) has each call's
	// arguments whole when it is done.
	calls   map[int]*responsesStreamCall
	pending []*responsesStreamCall
}

type responsesStreamCall struct {
	index    int // output_index
	id, name string
	callID   string
	args     strings.Builder
}

// Emit writes what ev makes known.
func (r *responsesStreamWriter) Emit(ev Event) error {
	if ev.Type != EventStart && !r.started {
		r.start(Response{})
	}
	switch ev.Type {
	case EventStart:
		r.start(ev.Response)
		if t, ok := detailsThinking(ev.Response.Message, false); ok {
			r.carried = true
			r.openReasoning(-1, t.ID)
			r.summaryDelta(t.Text)
			r.closeReasoning(t)
		}
	case EventText:
		r.content("output_text", ev.Delta, ev.Logprobs)
	case EventRefusal:
		r.content("refusal", ev.Delta, nil)
	case EventThinking:
		if r.carried {
			break
		}
		r.openReasoning(ev.Index, ev.Thinking.ID)
		r.summaryDelta(ev.Delta)
	case EventThinkingDone:
		if r.carried {
			break
		}
		if r.openKind != "reasoning" || r.openKey != ev.Index {
			r.openReasoning(ev.Index, ev.Thinking.ID)
			r.summaryDelta(ev.Thinking.Text)
		}
		r.closeReasoning(ev.Thinking)
	case EventToolCall:
		r.openCall(ev.Index, ev.ToolCall)
	case EventToolArgs:
		c, ok := r.calls[ev.Index]
		if !ok {
			c = r.openCall(ev.Index, ToolCall{})
		}
		c.args.WriteString(ev.Delta)
		r.emit("response.function_call_arguments.delta", map[string]any{"item_id": c.id, "output_index": c.index, "delta": ev.Delta})
	case EventFinish:
		if t, ok := detailsThinking(ev.Response.Message, false); ok && !r.carried {
			r.openReasoning(-1, t.ID) // state streamed by a chat upstream
			r.summaryDelta(t.Text)
			r.closeReasoning(t)
		}
		r.closeItem()
		if len(r.calls) == 0 && !r.hasMessage() {
			// An answer of nothing is an empty message, as EncodeResponse has it.
			r.content("output_text", "", nil)
			r.closeItem()
		}
		output := make([]map[string]any, 0, len(r.items))
		for _, it := range r.items {
			if it != nil {
				output = append(output, it)
			}
		}
		resp := ev.Response
		resp.ID = orDefault(resp.ID, r.resp.ID)
		final := responsesObject(resp, "completed", output)
		typ := "response.completed"
		if final["status"] == "incomplete" {
			typ = "response.incomplete"
		}
		r.emit(typ, map[string]any{"response": final})
	}
	return r.s.err
}

func (r *responsesStreamWriter) emit(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = r.seq
	r.seq++
	r.s.event(typ, fields)
}

func (r *responsesStreamWriter) start(resp Response) {
	r.started = true
	r.resp = Response{ID: resp.ID, Model: resp.Model}
	r.emit("response.created", map[string]any{"response": responsesObject(resp, "in_progress", []map[string]any{})})
	r.emit("response.in_progress", map[string]any{"response": responsesObject(resp, "in_progress", []map[string]any{})})
}

func (r *responsesStreamWriter) hasMessage() bool {
	for _, it := range r.items {
		if it != nil && it["type"] == "message" {
			return true
		}
	}
	return false
}

// openItem closes the open item and adds one, as added says.
func (r *responsesStreamWriter) openItem(kind string, key int, added map[string]any) int {
	r.closeItem()
	return r.addItem(kind, key, added)
}

// addItem adds an item, as added says, and makes it the open one.
func (r *responsesStreamWriter) addItem(kind string, key int, added map[string]any) int {
	r.open, r.openKind, r.openKey = len(r.items), kind, key
	r.items = append(r.items, nil)
	r.emit("response.output_item.added", map[string]any{"output_index": r.open, "item": added})
	return r.open
}

// closeItem closes the open item, if any, and the pending calls.
func (r *responsesStreamWriter) closeItem() {
	for _, c := range r.pending {
		r.doneCall(c)
	}
	r.pending = r.pending[:0]
	switch r.openKind {
	case "message":
		r.closePart()
		r.doneItem(map[string]any{"type": "message", "id": r.messageID(), "status": "completed",
			"role": RoleAssistant, "content": r.parts})
	case "reasoning":
		r.closeReasoning(Thinking{Text: r.reasoning.String()})
	case "function_call":
		r.doneCall(r.calls[r.openKey])
		r.open, r.openKind = -1, ""
	}
}

// doneCall ends a function call item.
func (r *responsesStreamWriter) doneCall(c *responsesStreamCall) {
	args := orDefault(c.args.String(), "{}")
	r.emit("response.function_call_arguments.done", map[string]any{"item_id": c.id, "output_index": c.index, "arguments": args, "name": c.name})
	item := map[string]any{"type": "function_call", "id": c.id, "call_id": c.callID,
		"name": c.name, "arguments": args, "status": "completed"}
	r.items[c.index] = item
	r.emit("response.output_item.done", map[string]any{"output_index": c.index, "item": item})
}

// doneItem ends the open item with item, whole.
func (r *responsesStreamWriter) doneItem(item map[string]any) {
	r.items[r.open] = item
	r.emit("response.output_item.done", map[string]any{"output_index": r.open, "item": item})
	r.open, r.openKind = -1, ""
}

func (r *responsesStreamWriter) messageID() string { return "msg_" + orDefault(r.resp.ID, "evalflow") }

// content writes a piece of the message's text or refusal, with its
// tokens' log probabilities, opening the message item and the content
// part as needed.
func (r *responsesStreamWriter) content(kind, delta string, logprobs []TokenLogprob) {
	if r.openKind != "message" {
		r.openItem("message", 0, map[string]any{"type": "message", "id": r.messageID(), "status": "in_progress",
			"role": RoleAssistant, "content": []any{}})
		r.parts = []map[string]any{}
	}
	if r.partKind != kind {
		r.closePart()
		r.partKind = kind
		f := r.partFields()
		if kind == "refusal" {
			f["part"] = map[string]any{"type": "refusal", "refusal": ""}
		} else {
			f["part"] = map[string]any{"type": "output_text", "text": "", "annotations": []any{}, "logprobs": []any{}}
		}
		r.emit("response.content_part.added", f)
	}
	if delta == "" {
		return
	}
	r.partText.WriteString(delta)
	r.partLogprobs = append(r.partLogprobs, logprobs...)
	f := r.partFields()
	f["delta"] = delta
	if kind == "refusal" {
		r.emit("response.refusal.delta", f)
	} else {
		f["logprobs"] = wireLogprobs(logprobs)
		r.emit("response.output_text.delta", f)
	}
}

func (r *responsesStreamWriter) partFields() map[string]any {
	return map[string]any{"item_id": r.messageID(), "output_index": r.open, "content_index": len(r.parts)}
}

// closePart ends the message's open content part, if any.
func (r *responsesStreamWriter) closePart() {
	if r.partKind == "" {
		return
	}
	text := r.partText.String()
	var part map[string]any
	f := r.partFields()
	if r.partKind == "refusal" {
		f["refusal"] = text
		r.emit("response.refusal.done", f)
		part = map[string]any{"type": "refusal", "refusal": text}
	} else {
		f["text"] = text
		f["logprobs"] = wireLogprobs(r.partLogprobs)
		r.emit("response.output_text.done", f)
		part = map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": wireLogprobs(r.partLogprobs)}
	}
	f = r.partFields()
	f["part"] = part
	r.emit("response.content_part.done", f)
	r.parts = append(r.parts, part)
	r.partKind = ""
	r.partText.Reset()
	r.partLogprobs = nil
}

// openReasoning opens the reasoning item of thinking block key, unless it
// is open, with id or one of the writer's.
func (r *responsesStreamWriter) openReasoning(key int, id string) {
	if r.openKind == "reasoning" && r.openKey == key {
		return
	}
	r.closeItem()
	r.reasoningID = orDefault(id, fmt.Sprintf("rs_evalflow_%d", r.thinkingN))
	r.thinkingN++
	r.reasoning.Reset()
	r.summaryOpen = false
	r.openItem("reasoning", key, map[string]any{"type": "reasoning", "id": r.reasoningID, "summary": []any{}})
}

func (r *responsesStreamWriter) summaryFields() map[string]any {
	return map[string]any{"item_id": r.reasoningID, "output_index": r.open, "summary_index": 0}
}

func (r *responsesStreamWriter) summaryDelta(delta string) {
	if delta == "" {
		return
	}
	if !r.summaryOpen {
		r.summaryOpen = true
		f := r.summaryFields()
		f["part"] = map[string]any{"type": "summary_text", "text": ""}
		r.emit("response.reasoning_summary_part.added", f)
	}
	r.reasoning.WriteString(delta)
	f := r.summaryFields()
	f["delta"] = delta
	r.emit("response.reasoning_summary_text.delta", f)
}

// closeReasoning ends the open reasoning item with t's state.
func (r *responsesStreamWriter) closeReasoning(t Thinking) {
	if r.summaryOpen {
		text := r.reasoning.String()
		f := r.summaryFields()
		f["text"] = text
		r.emit("response.reasoning_summary_text.done", f)
		f = r.summaryFields()
		f["part"] = map[string]any{"type": "summary_text", "text": text}
		r.emit("response.reasoning_summary_part.done", f)
		r.summaryOpen = false
	}
	item := responsesCallerItem(t, r.thinkingN-1)
	item["id"] = r.reasoningID // as it was added
	r.doneItem(item)
}

// openCall opens the function call item of tool call key.
func (r *responsesStreamWriter) openCall(key int, tc ToolCall) *responsesStreamCall {
	if r.calls == nil {
		r.calls = make(map[int]*responsesStreamCall)
	}
	c := &responsesStreamCall{id: fmt.Sprintf("fc_%d", len(r.calls)), name: tc.Name, callID: tc.ID}
	r.calls[key] = c
	if r.openKind == "function_call" { // stays open beside the new one
		r.pending = append(r.pending, r.calls[r.openKey])
		r.open, r.openKind = -1, ""
	} else {
		r.closeItem()
	}
	c.index = r.addItem("function_call", key, map[string]any{"type": "function_call", "id": c.id, "call_id": c.callID,
		"name": c.name, "arguments": "", "status": "in_progress"})
	return c
}
