package dialects

import "io"

// NewStreamWriter returns a writer of Messages stream events.
func (anthropicDialect) NewStreamWriter(w io.Writer) StreamWriter {
	return &anthropicStreamWriter{s: sse{w: w}, open: -1}
}

// WriteStream writes message_start, each block's start, deltas and stop,
// message_delta and message_stop.
func (d anthropicDialect) WriteStream(w io.Writer, resp Response) error {
	return writeStream(d.NewStreamWriter(w), resp)
}

// anthropicStreamWriter writes Messages stream events as the answer's
// events arrive. Content blocks are numbered in the order they open; a
// block is stopped when the next one starts, so at most one is open.
// Pieces of a block already stopped (an upstream interleaving two tool
// calls) go to that block's index, which the SDKs accept.
type anthropicStreamWriter struct {
	s       sse
	started bool
	next    int // the index of the next block
	open    int // the open block's index, or -1
	// openKind and openKey say what the open block holds: "text", or
	// "thinking" or "tool_use" with the Event Index.
	openKind string
	openKey  int
	thinking map[int]int // thinking block Event Index → block index
	tools    map[int]int // tool call Event Index → block index
	// text says whether any text was written; refusing, whether a
	// refusal is being written as text.
	text, refusing bool
	// carried says the answer's reasoning went as one block carrying a
	// chat upstream's reasoning_details; its own thinking events are not
	// written.
	carried bool
}

type anthropicDeltaEvent struct {
	Type  string         `json:"type"`
	Index int            `json:"index"`
	Delta anthropicDelta `json:"delta"`
}

type anthropicDelta struct {
	Type        string  `json:"type"`
	Text        *string `json:"text,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
	Thinking    *string `json:"thinking,omitempty"`
	Signature   *string `json:"signature,omitempty"`
}

// Emit writes what ev makes known.
func (a *anthropicStreamWriter) Emit(ev Event) error {
	if ev.Type != EventStart && !a.started {
		a.start(Response{})
	}
	switch ev.Type {
	case EventStart:
		a.start(ev.Response)
		if t, ok := detailsThinking(ev.Response.Message, true); ok {
			a.carried = true
			a.thinkingDone(-1, t)
		}
	case EventText:
		a.writeText(ev.Delta)
	case EventRefusal:
		if !a.text || a.refusing {
			a.refusing = true
			a.writeText(ev.Delta)
		}
	case EventThinking:
		if a.carried {
			break
		}
		a.delta(a.thinkingBlock(ev.Index), anthropicDelta{Type: "thinking_delta", Thinking: &ev.Delta})
	case EventThinkingDone:
		if !a.carried {
			a.thinkingDone(ev.Index, ev.Thinking)
		}
	case EventToolCall:
		a.toolBlock(ev.Index, ev.ToolCall)
	case EventToolArgs:
		i, ok := a.tools[ev.Index]
		if !ok {
			i = a.toolBlock(ev.Index, ToolCall{})
		}
		a.delta(i, anthropicDelta{Type: "input_json_delta", PartialJSON: &ev.Delta})
	case EventFinish:
		if t, ok := detailsThinking(ev.Response.Message, true); ok && !a.carried {
			a.thinkingDone(-1, t) // state streamed by a chat upstream
		}
		a.stop()
		a.s.event("message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": anthropicStopOf(ev.Response), "stop_sequence": nil},
			"usage": anthropicUsageOf(ev.Response.Usage)})
		a.s.event("message_stop", map[string]any{"type": "message_stop"})
	}
	return a.s.err
}

// anthropicStartEvent is message_start, as written.
type anthropicStartEvent struct {
	Type    string `json:"type"`
	Message struct {
		ID           string           `json:"id"`
		Type         string           `json:"type"`
		Role         string           `json:"role"`
		Model        string           `json:"model"`
		Content      []anthropicBlock `json:"content"`
		StopReason   *string          `json:"stop_reason"`
		StopSequence *string          `json:"stop_sequence"`
		Usage        map[string]int   `json:"usage"`
	} `json:"message"`
}

func (a *anthropicStreamWriter) start(resp Response) {
	a.started = true
	ev := anthropicStartEvent{Type: "message_start"}
	m := &ev.Message
	m.ID, m.Type, m.Role, m.Model = orDefault(resp.ID, "msg_evalflow"), "message", RoleAssistant, resp.Model
	m.Content = []anthropicBlock{}
	m.Usage = anthropicUsageOf(resp.Usage)
	m.Usage["output_tokens"] = 0
	a.s.event("message_start", &ev)
}

func (a *anthropicStreamWriter) writeText(text string) {
	if a.openKind != "text" {
		a.startBlock("text", 0, anthropicTextStart)
	}
	a.text = true
	a.delta(a.open, anthropicDelta{Type: "text_delta", Text: &text})
}

// anthropicTextStart is a text block's content_block_start head.
var anthropicTextStart = struct {
	Type string `json:"type"`
	Text string `json:"text"`
}{Type: "text"}

// thinkingBlock is the block index of thinking block key, started if new.
func (a *anthropicStreamWriter) thinkingBlock(key int) int {
	if i, ok := a.thinking[key]; ok {
		return i
	}
	i := a.startBlock("thinking", key, map[string]any{"type": "thinking", "thinking": "", "signature": ""})
	if a.thinking == nil {
		a.thinking = make(map[int]int)
	}
	a.thinking[key] = i
	return i
}

// thinkingDone writes a thinking block's state: a redacted block whole,
// or the signature of a thinking block, which it stops.
func (a *anthropicStreamWriter) thinkingDone(key int, t Thinking) {
	b, ok := anthropicThinkingBlock(t, true)
	if !ok {
		return
	}
	i, seen := a.thinking[key]
	if b.Type != "thinking" {
		if !seen {
			if a.thinking == nil {
				a.thinking = make(map[int]int)
			}
			a.thinking[key] = a.startBlock(b.Type, key, b)
			a.stop()
		}
		return
	}
	if !seen {
		i = a.thinkingBlock(key)
		if t.Text != "" {
			a.delta(i, anthropicDelta{Type: "thinking_delta", Thinking: &t.Text})
		}
	}
	if *b.Signature != "" {
		a.delta(i, anthropicDelta{Type: "signature_delta", Signature: b.Signature})
	}
	if a.open == i {
		a.stop()
	}
}

func (a *anthropicStreamWriter) toolBlock(key int, tc ToolCall) int {
	i := a.startBlock("tool_use", key, map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": map[string]any{}})
	if a.tools == nil {
		a.tools = make(map[int]int)
	}
	a.tools[key] = i
	return i
}

// anthropicBlockEvent is content_block_start or content_block_stop, as
// written.
type anthropicBlockEvent struct {
	Type         string `json:"type"`
	Index        int    `json:"index"`
	ContentBlock any    `json:"content_block,omitempty"`
}

// startBlock stops the open block and starts one with head.
func (a *anthropicStreamWriter) startBlock(kind string, key int, head any) int {
	a.stop()
	a.open, a.openKind, a.openKey = a.next, kind, key
	a.next++
	a.s.event("content_block_start", anthropicBlockEvent{Type: "content_block_start", Index: a.open, ContentBlock: head})
	return a.open
}

// stop stops the open block, if any.
func (a *anthropicStreamWriter) stop() {
	if a.open < 0 {
		return
	}
	a.s.event("content_block_stop", anthropicBlockEvent{Type: "content_block_stop", Index: a.open})
	a.open, a.openKind = -1, ""
}

func (a *anthropicStreamWriter) delta(i int, d anthropicDelta) {
	a.s.event("content_block_delta", anthropicDeltaEvent{Type: "content_block_delta", Index: i, Delta: d})
}
