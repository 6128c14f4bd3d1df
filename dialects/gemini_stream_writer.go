package dialects

import "io"

// NewStreamWriter returns a writer of streamGenerateContent chunks
// (alt=sse).
func (geminiDialect) NewStreamWriter(w io.Writer) StreamWriter {
	return &geminiStreamWriter{s: sse{w: w}}
}

// WriteStream writes resp as chunks: thoughts, text, and last the
// function calls with the finishReason and usage.
func (d geminiDialect) WriteStream(w io.Writer, resp Response) error {
	return writeStream(d.NewStreamWriter(w), resp)
}

// geminiStreamWriter writes Gemini chunks as the answer's events arrive:
// a chunk per piece of text or thought, as Gemini streams them. Function
// calls come whole in Gemini's chunks, so their arguments are gathered
// and the calls written with the last chunk, each with the thought
// signature it bore.
type geminiStreamWriter struct {
	s     sse
	head  Response // id and model
	calls []ToolCall
	keys  map[int]int // tool call Event Index → calls
	// onCall holds the signatures of function calls, by id.
	onCall map[string]string
}

// Emit writes what ev makes known.
func (g *geminiStreamWriter) Emit(ev Event) error {
	switch ev.Type {
	case EventStart:
		g.head = ev.Response
	case EventText, EventRefusal:
		text := ev.Delta
		g.chunk(geminiPart{Text: &text})
	case EventThinking:
		text := ev.Delta
		g.chunk(geminiPart{Text: &text, Thought: true})
	case EventThinkingDone:
		g.thinkingDone(ev.Thinking)
	case EventToolCall:
		if g.keys == nil {
			g.keys = map[int]int{}
		}
		g.keys[ev.Index] = len(g.calls)
		g.calls = append(g.calls, ev.ToolCall)
	case EventToolArgs:
		i, ok := g.keys[ev.Index]
		if !ok {
			g.keys[ev.Index], i = len(g.calls), len(g.calls)
			g.calls = append(g.calls, ToolCall{})
		}
		g.calls[i].Arguments += ev.Delta
	case EventFinish:
		g.finish(ev.Response)
	}
	return g.s.err
}

// thinkingDone writes a thought's state as a part of its own with only
// the signature: on a thought, on an empty text part, or kept for its
// function call.
func (g *geminiStreamWriter) thinkingDone(t Thinking) {
	ts := geminiThinking(Message{Thinking: []Thinking{{Signature: t.Signature, Redacted: t.Redacted,
		ID: t.ID, Encrypted: t.Encrypted, ThoughtSignature: t.ThoughtSignature, ThoughtOn: t.ThoughtOn}}}, true)
	if len(ts) == 0 || ts[0].ThoughtSignature == "" {
		return
	}
	sig, on := ts[0].ThoughtSignature, ts[0].ThoughtOn
	empty := ""
	switch {
	case on == "":
		g.chunk(geminiPart{Text: &empty, Thought: true, ThoughtSignature: sig})
	case len(on) > 5 && on[:5] == "text:":
		g.chunk(geminiPart{Text: &empty, ThoughtSignature: sig})
	default:
		if g.onCall == nil {
			g.onCall = map[string]string{}
		}
		g.onCall[on[len("call:"):]] = sig
	}
}

// chunk writes one chunk holding parts.
func (g *geminiStreamWriter) chunk(parts ...geminiPart) {
	g.s.event("", geminiResponseOut(g.head, parts, false))
}

// finish writes the last chunk: the function calls, the finishReason and
// the usage.
func (g *geminiStreamWriter) finish(resp Response) {
	if resp.Model == "" {
		resp.Model = g.head.Model
	}
	resp.ID = orDefault(resp.ID, g.head.ID)
	if len(g.calls) > 0 && resp.FinishReason == "" {
		resp.FinishReason = FinishToolCalls
	}
	var parts []geminiPart
	for _, tc := range g.calls {
		fc := &geminiFunctionCall{Name: tc.Name, Args: rawArgs(tc.Arguments)}
		if len(tc.ID) < len(geminiCallPrefix) || tc.ID[:len(geminiCallPrefix)] != geminiCallPrefix {
			fc.ID = tc.ID
		}
		parts = append(parts, geminiPart{FunctionCall: fc, ThoughtSignature: g.onCall[tc.ID]})
	}
	g.s.event("", geminiResponseOut(resp, parts, true))
}
