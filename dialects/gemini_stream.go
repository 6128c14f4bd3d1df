package dialects

import (
	"bytes"
	"fmt"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

// NewStream returns an empty *GeminiStream.
func (geminiDialect) NewStream() Stream { return &GeminiStream{} }

// GeminiStream assembles a streamGenerateContent answer (alt=sse: each
// event a GenerateContentResponse chunk holding the parts that are new)
// into a Response. The answer ends with the chunk that has a
// finishReason. The zero value is ready to use.
type GeminiStream struct {
	last    geminiResponse
	parts   []geminiPart
	started bool
	done    bool
	// thinking is the open thought's Event Index, -1 when none is open;
	// blocks counts the thinking blocks, tools the function calls.
	thinking, blocks, tools int
	events                  []Event
}

// Add consumes one chunk. An error chunk is returned as a *GeminiError.
func (s *GeminiStream) Add(data []byte) error {
	s.events = s.events[:0]
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil
	}
	var chunk geminiResponse
	if err := jsonwire.Unmarshal(data, &chunk); err != nil {
		return fmt.Errorf("decode gemini chunk: %w", err)
	}
	if chunk.Error != nil {
		return geminiDialect{}.ParseError(0, data)
	}
	if !s.started {
		s.started, s.thinking = true, -1
		s.last = chunk
		start, _ := geminiResponse{ResponseID: chunk.ResponseID, ModelVersion: chunk.ModelVersion,
			UsageMetadata: chunk.UsageMetadata}.response()
		s.events = append(s.events, Event{Type: EventStart, Response: start})
	}
	s.last.ResponseID = orDefault(chunk.ResponseID, s.last.ResponseID)
	s.last.ModelVersion = orDefault(chunk.ModelVersion, s.last.ModelVersion)
	if chunk.UsageMetadata != nil {
		s.last.UsageMetadata = chunk.UsageMetadata // cumulative
	}
	if chunk.PromptFeedback != nil {
		s.last.PromptFeedback = chunk.PromptFeedback
	}
	if len(chunk.Candidates) > 0 {
		c := chunk.Candidates[0]
		if c.Content != nil {
			for _, p := range c.Content.Parts {
				s.add(p)
			}
		}
		if c.FinishReason != "" {
			s.closeThought()
			s.last.Candidates = []geminiCandidate{{FinishReason: c.FinishReason}}
			s.done = true
		}
	} else if chunk.PromptFeedback != nil && chunk.PromptFeedback.BlockReason != "" {
		s.done = true
	}
	return nil
}

// add takes one part: text and thoughts join the part before of their
// kind, unless it bore a signature.
func (s *GeminiStream) add(p geminiPart) {
	switch {
	case p.Thought:
		if s.thinking < 0 {
			s.thinking = s.blocks
			s.blocks++
		}
		if p.Text != nil {
			s.emit(Event{Type: EventThinking, Index: s.thinking, Delta: *p.Text})
		}
		s.join(p)
		if p.ThoughtSignature != "" {
			s.closeThought()
		}
		return
	case p.FunctionCall != nil:
		s.closeThought()
		fc := *p.FunctionCall
		id := geminiCallID(&fc, 0, len(s.parts))
		s.emit(Event{Type: EventToolCall, Index: s.tools, ToolCall: ToolCall{ID: id, Name: fc.Name}})
		s.emit(Event{Type: EventToolArgs, Index: s.tools, Delta: geminiArgs(fc.Args)})
		s.tools++
		if p.ThoughtSignature != "" {
			s.stateDone(Thinking{ThoughtSignature: p.ThoughtSignature, ThoughtOn: "call:" + id})
		}
		s.parts = append(s.parts, p)
		return
	}
	s.closeThought()
	if p.Text != nil {
		s.emit(Event{Type: EventText, Delta: *p.Text})
		s.join(p)
		if p.ThoughtSignature != "" {
			s.stateDone(Thinking{ThoughtSignature: p.ThoughtSignature, ThoughtOn: "text:" + fmt.Sprint(s.texts()-1)})
		}
		return
	}
	s.parts = append(s.parts, p)
}

// join appends text part p to the last part when that is a text part of
// the same kind without a signature, or else as a part of its own.
func (s *GeminiStream) join(p geminiPart) {
	if n := len(s.parts); n > 0 && p.Text != nil {
		last := &s.parts[n-1]
		if last.Text != nil && last.Thought == p.Thought && last.ThoughtSignature == "" {
			text := *last.Text + *p.Text
			last.Text, last.ThoughtSignature = &text, p.ThoughtSignature
			return
		}
	}
	s.parts = append(s.parts, p)
}

// texts counts the answer's text parts so far.
func (s *GeminiStream) texts() int {
	n := 0
	for _, p := range s.parts {
		if p.Text != nil && !p.Thought && (*p.Text != "" || p.ThoughtSignature == "") {
			n++
		}
	}
	return max(n, 1)
}

// closeThought closes the open thought, with the signature it bore.
func (s *GeminiStream) closeThought() {
	if s.thinking < 0 {
		return
	}
	var t Thinking
	if n := len(s.parts); n > 0 && s.parts[n-1].Thought {
		t.ThoughtSignature = s.parts[n-1].ThoughtSignature
		if s.parts[n-1].Text != nil {
			t.Text = *s.parts[n-1].Text
		}
	}
	s.emit(Event{Type: EventThinkingDone, Index: s.thinking, Thinking: t})
	s.thinking = -1
}

// stateDone notes a signature borne by a text or call part, as a
// thinking block of its own.
func (s *GeminiStream) stateDone(t Thinking) {
	s.emit(Event{Type: EventThinkingDone, Index: s.blocks, Thinking: t})
	s.blocks++
}

func (s *GeminiStream) emit(ev Event) { s.events = addEvent(s.events, ev) }

// Events is what the last Add made known.
func (s *GeminiStream) Events() []Event { return s.events }

// Done reports whether the chunk with the finishReason was seen.
func (s *GeminiStream) Done() bool { return s.done }

// Response returns what was assembled so far.
func (s *GeminiStream) Response() Response {
	gr := s.last
	reason := ""
	if len(gr.Candidates) > 0 {
		reason = gr.Candidates[0].FinishReason
	}
	if len(s.parts) > 0 || reason != "" {
		gr.Candidates = []geminiCandidate{{Content: &geminiContent{Role: geminiRoleModel, Parts: s.parts}, FinishReason: reason}}
	}
	r, err := gr.response()
	if err != nil {
		// Carried state that does not decode: the answer without it.
		r, _ = geminiResponse{ResponseID: gr.ResponseID, ModelVersion: gr.ModelVersion, UsageMetadata: gr.UsageMetadata}.response()
	}
	return r
}
