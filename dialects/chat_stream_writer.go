package dialects

import (
	"encoding/json"
	"io"
)

// NewStreamWriter returns a writer of chat.completion.chunk events that
// ends with a usage chunk; StreamWriterFor writes it only when the caller
// asked.
func (chatDialect) NewStreamWriter(w io.Writer) StreamWriter {
	return newChatStreamWriter(w, true)
}

func newChatStreamWriter(w io.Writer, usage bool) *chatStreamWriter {
	return &chatStreamWriter{s: sse{w: w}, id: "chatcmpl-evalflow", usage: usage}
}

// WriteStream writes resp as chat.completion.chunk events and [DONE].
func (d chatDialect) WriteStream(w io.Writer, resp Response) error {
	return writeStream(d.NewStreamWriter(w), resp)
}

// chatStreamWriter writes chunks as the answer's events arrive: a role
// chunk first, reasoning as reasoning_content, tool calls numbered in the
// order they open, the finish reason, and, when usage is set, the usage
// on a last chunk of its own with no choices, as OpenAI sends it for
// stream_options.include_usage.
type chatStreamWriter struct {
	s         sse
	id, model string
	started   bool
	usage     bool
	// calls maps an Event's tool call Index to its chat index; hasArgs
	// says which chat indexes had arguments.
	calls    map[int]int
	hasArgs  []bool
	thinking map[int]bool // thinking blocks with reasoning written
}

type chatDelta struct {
	Role             string            `json:"role,omitempty"`
	Content          *string           `json:"content,omitempty"`
	ReasoningContent *string           `json:"reasoning_content,omitempty"`
	ReasoningDetails json.RawMessage   `json:"reasoning_details,omitempty"`
	Refusal          *string           `json:"refusal,omitempty"`
	ToolCalls        []chatOutToolCall `json:"tool_calls,omitempty"`
}

// Emit writes what ev makes known.
func (c *chatStreamWriter) Emit(ev Event) error {
	if ev.Type != EventStart && !c.started {
		c.start(Response{})
	}
	switch ev.Type {
	case EventStart:
		c.start(ev.Response)
	case EventThinking:
		c.reasoning(ev.Index, ev.Delta)
	case EventThinkingDone:
		if !c.thinking[ev.Index] {
			c.reasoning(ev.Index, chatReasoningOf(ev.Thinking))
		}
	case EventText:
		c.choice(chatChoiceOut{Delta: chatDelta{Content: &ev.Delta}, Logprobs: chatLogprobsOut(ev.Logprobs)})
	case EventRefusal:
		c.chunk(chatDelta{Refusal: &ev.Delta}, nil)
	case EventToolCall:
		var head chatOutToolCall
		i := c.call(ev.Index)
		head.Index, head.ID, head.Type = &i, ev.ToolCall.ID, "function"
		head.Function.Name = ev.ToolCall.Name
		c.chunk(chatDelta{ToolCalls: []chatOutToolCall{head}}, nil)
	case EventToolArgs:
		c.args(c.call(ev.Index), ev.Delta)
	case EventFinish:
		for i, has := range c.hasArgs {
			if !has {
				c.args(i, "{}")
			}
		}
		if d := chatReasoningDetails(ev.Response.Message); d != nil {
			c.chunk(chatDelta{ReasoningDetails: d}, nil)
		}
		finish := orDefault(ev.Response.FinishReason, FinishStop)
		c.chunk(chatDelta{}, &finish)
		if c.usage {
			c.s.event("", &chatUsageChunkOut{ID: c.id, Object: "chat.completion.chunk", Model: c.model,
				Usage: chatOutUsageOf(ev.Response.Usage)})
		}
		c.s.raw("", []byte("[DONE]"))
	}
	return c.s.err
}

func (c *chatStreamWriter) start(resp Response) {
	c.started = true
	c.id, c.model = orDefault(resp.ID, c.id), resp.Model
	empty := ""
	c.chunk(chatDelta{Role: RoleAssistant, Content: &empty}, nil)
}

func (c *chatStreamWriter) reasoning(block int, text string) {
	if text == "" {
		return
	}
	if c.thinking == nil {
		c.thinking = make(map[int]bool)
	}
	c.thinking[block] = true
	c.chunk(chatDelta{ReasoningContent: &text}, nil)
}

// call is the chat index of an Event's tool call Index.
func (c *chatStreamWriter) call(index int) int {
	if i, ok := c.calls[index]; ok {
		return i
	}
	if c.calls == nil {
		c.calls = make(map[int]int)
	}
	i := len(c.hasArgs)
	c.calls[index] = i
	c.hasArgs = append(c.hasArgs, false)
	return i
}

func (c *chatStreamWriter) args(i int, delta string) {
	c.hasArgs[i] = true
	var part chatOutToolCall
	part.Index = &i
	part.Function.Arguments = delta
	c.chunk(chatDelta{ToolCalls: []chatOutToolCall{part}}, nil)
}

// chatChunkOut is a chat.completion.chunk as written.
type chatChunkOut struct {
	ID      string           `json:"id"`
	Object  string           `json:"object"`
	Created int              `json:"created"`
	Model   string           `json:"model"`
	Choices [1]chatChoiceOut `json:"choices"`
}

// chatUsageChunkOut is the last chunk of a stream that reports usage.
type chatUsageChunkOut struct {
	ID      string           `json:"id"`
	Object  string           `json:"object"`
	Created int              `json:"created"`
	Model   string           `json:"model"`
	Choices [0]chatChoiceOut `json:"choices"`
	Usage   *chatOutUsage    `json:"usage"`
}

type chatChoiceOut struct {
	Index        int            `json:"index"`
	Delta        chatDelta      `json:"delta"`
	FinishReason *string        `json:"finish_reason"`
	Logprobs     map[string]any `json:"logprobs"`
}

func (c *chatStreamWriter) chunk(d chatDelta, finish *string) {
	c.choice(chatChoiceOut{Delta: d, FinishReason: finish})
}

// choice writes a chunk of one choice.
func (c *chatStreamWriter) choice(choice chatChoiceOut) {
	ch := chatChunkOut{ID: c.id, Object: "chat.completion.chunk", Model: c.model}
	ch.Choices[0] = choice
	c.s.event("", &ch)
}

// chatReasoningOf is the reasoning_content a thinking block becomes for a
// chat caller: its text. The blocks' provider state goes in
// reasoning_details (chatReasoningDetails), on a chunk of its own before
// the finish.
func chatReasoningOf(t Thinking) string { return t.Text }
