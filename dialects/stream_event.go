package dialects

import "io"

// EventType says what an Event carries.
type EventType int

// The events of a streamed answer, in dialect-neutral form. A stream is
// EventStart, then the answer's pieces in the order they arrived, then
// EventFinish.
const (
	// EventStart opens the answer: Response holds its ID, Model and the
	// usage known so far (Anthropic's input tokens).
	EventStart EventType = iota + 1
	// EventText is a piece of the answer's text, in Delta, with the log
	// probabilities of its tokens when the caller asked for them.
	EventText
	// EventRefusal is a piece of a refusal, in Delta.
	EventRefusal
	// EventThinking is a piece of the reasoning text of thinking block
	// Index, in Delta; Thinking.ID is the block's id when known already
	// (a Responses reasoning item's).
	EventThinking
	// EventThinkingDone closes thinking block Index: Thinking is the block
	// whole, with its provider state (signature, redacted data, item id,
	// encrypted content). A block may close without pieces (redacted).
	EventThinkingDone
	// EventToolCall opens tool call Index: ToolCall holds its ID and Name.
	EventToolCall
	// EventToolArgs is a piece of tool call Index's arguments, in Delta.
	EventToolArgs
	// EventFinish closes the answer: Response is the whole of it, with
	// its finish reason and usage.
	EventFinish
)

// Event is one step of a streamed answer. Index keys a thinking block or
// a tool call within the answer: the same value for the pieces of one
// block, in no promised range.
type Event struct {
	Type     EventType
	Index    int
	Delta    string
	ToolCall ToolCall
	Thinking Thinking
	Response Response
	Logprobs []TokenLogprob
}

// StreamWriter writes a streamed answer in one dialect's native events,
// as the answer's Events arrive: each call writes (and flushes, when the
// writer is an http.Flusher) what the event makes known to the caller.
// After an error, it writes nothing more.
type StreamWriter interface {
	Emit(ev Event) error
}

// EventsOf is resp as a stream's events: thinking blocks, text, refusal
// and tool calls in that order, text and arguments split over several
// pieces, as a dialect's WriteStream sends a whole answer.
func EventsOf(resp Response) []Event {
	m := resp.Message
	evs := []Event{{Type: EventStart, Response: resp}}
	for i, t := range thinkingOf(m) {
		for _, p := range pieces(t.Text, 4) {
			evs = append(evs, Event{Type: EventThinking, Index: i, Delta: p, Thinking: Thinking{ID: t.ID}})
		}
		evs = append(evs, Event{Type: EventThinkingDone, Index: i, Thinking: t})
	}
	text := pieces(textOf(m.Content), 4)
	for i, p := range text {
		ev := Event{Type: EventText, Delta: p}
		if i == len(text)-1 {
			ev.Logprobs = resp.Logprobs // the text's tokens, with its last piece
		}
		evs = append(evs, ev)
	}
	for _, p := range pieces(m.Refusal, 2) {
		evs = append(evs, Event{Type: EventRefusal, Delta: p})
	}
	for i, tc := range m.ToolCalls {
		evs = append(evs, Event{Type: EventToolCall, Index: i, ToolCall: ToolCall{ID: tc.ID, Name: tc.Name}})
		for _, p := range pieces(orDefault(tc.Arguments, "{}"), 3) {
			evs = append(evs, Event{Type: EventToolArgs, Index: i, Delta: p})
		}
	}
	return append(evs, Event{Type: EventFinish, Response: resp})
}

// StreamWriterFor returns d's StreamWriter for the answer to req, which
// writes what req asked for: a chat caller's stream ends with a usage
// chunk only when req asked for one (stream_options.include_usage), as
// OpenAI's does; log probabilities go only to a caller that asked for them
// (an upstream may have been asked for them by the run).
func StreamWriterFor(d Dialect, w io.Writer, req Request) StreamWriter {
	var sw StreamWriter
	if d.Name() == NameChat {
		sw = newChatStreamWriter(w, req.StreamUsage)
	} else {
		sw = d.NewStreamWriter(w)
	}
	if !req.Logprobs {
		sw = withoutLogprobs{sw}
	}
	return sw
}

// WriteStreamFor writes resp whole as the streamed answer to req, through
// StreamWriterFor's writer.
func WriteStreamFor(d Dialect, w io.Writer, req Request, resp Response) error {
	return writeStream(StreamWriterFor(d, w, req), resp)
}

// AnswerFor is resp as the caller of req gets it: with log probabilities
// only when it asked for them.
func AnswerFor(req Request, resp Response) Response {
	if !req.Logprobs {
		resp.Logprobs = nil
	}
	return resp
}

// withoutLogprobs writes a stream's events without log probabilities.
type withoutLogprobs struct{ StreamWriter }

func (w withoutLogprobs) Emit(ev Event) error {
	ev.Logprobs, ev.Response.Logprobs = nil, nil
	return w.StreamWriter.Emit(ev)
}

// writeStream drives sw over the events of a whole answer.
func writeStream(sw StreamWriter, resp Response) error {
	for _, ev := range EventsOf(resp) {
		if err := sw.Emit(ev); err != nil {
			return err
		}
	}
	return nil
}

// addEvent appends ev to evs, unless it is an empty piece.
func addEvent(evs []Event, ev Event) []Event {
	switch ev.Type {
	case EventText, EventRefusal, EventThinking, EventToolArgs:
		if ev.Delta == "" {
			return evs
		}
	}
	return append(evs, ev)
}
