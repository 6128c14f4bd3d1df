package interception_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/trace"
)

const (
	streamText      = "The sum is 5."
	streamReasoning = "Let me add them."
	streamArgs      = `{"a":2,"b":3}`
)

// streamAnswer is an upstream's answer with everything its dialect
// carries: reasoning with its provider state, text, a tool call, usage.
func streamAnswer(up string) dialects.Response {
	resp := dialects.Response{
		ID: "ans_1", Model: "upstream-model", FinishReason: dialects.FinishToolCalls,
		Message: dialects.Message{Role: dialects.RoleAssistant, Reasoning: streamReasoning,
			Content:   []dialects.Part{{Type: dialects.PartText, Text: streamText}},
			ToolCalls: []dialects.ToolCall{{ID: "call_1", Name: "add", Arguments: streamArgs}}},
		Usage: dialects.Usage{InputTokens: 120, OutputTokens: 40},
	}
	switch up {
	case dialects.NameAnthropic:
		resp.Message.Thinking = []dialects.Thinking{{Text: streamReasoning, Signature: "sig-1"}, {Redacted: "opaque-data"}}
		resp.Usage.CacheReadTokens = 64
		resp.Usage.InputTokens += 64
	case dialects.NameResponses:
		resp.Message.Thinking = []dialects.Thinking{{Text: streamReasoning, ID: "rs_1", Encrypted: "enc-1"}}
		resp.Usage.ReasoningTokens = 12
	}
	return resp
}

// streamingUpstream is a provider of one dialect that answers every call
// with one answer: a JSON object, or, when asked to stream, its events,
// the last held of them kept back until the test opens the gate, or the
// connection cut after cutAfter of them.
type streamingUpstream struct {
	url      string
	events   [][]byte
	gate     chan struct{}
	held     int
	cutAfter int
	// endEarly ends the stream cleanly at cutAfter instead of breaking
	// the connection.
	endEarly bool
	sent     atomic.Int32 // events of the stream sent so far

	mu     sync.Mutex
	bodies [][]byte
}

func newStreamingUpstream(t *testing.T, d dialects.Dialect, resp dialects.Response, held, cutAfter int) *streamingUpstream {
	t.Helper()
	var sse bytes.Buffer
	require.NoError(t, d.WriteStream(&sse, resp))
	u := &streamingUpstream{gate: make(chan struct{}), held: held, cutAfter: cutAfter}
	for ev := range strings.SplitSeq(strings.TrimSpace(sse.String()), "\n\n") {
		u.events = append(u.events, []byte(ev+"\n\n"))
	}
	whole, err := d.EncodeResponse(resp)
	require.NoError(t, err)
	u.url = upstream(t, func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		_, _ = body.ReadFrom(r.Body)
		u.mu.Lock()
		u.bodies = append(u.bodies, body.Bytes())
		u.mu.Unlock()
		req, err := d.ParseRequest(body.Bytes())
		if !assert.NoError(t, err) {
			return
		}
		if !req.Stream {
			writeJSON(w, http.StatusOK, string(whole))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i, ev := range u.events {
			if i == u.cutAfter && u.cutAfter > 0 {
				if u.endEarly {
					return
				}
				panic(http.ErrAbortHandler) // the connection breaks, no end of stream
			}
			if i == len(u.events)-u.held {
				select {
				case <-u.gate:
				case <-r.Context().Done():
					return
				}
			}
			_, _ = w.Write(ev)
			w.(http.Flusher).Flush()
			u.sent.Add(1)
		}
	}).URL + "/v1"
	return u
}

func (u *streamingUpstream) lastBody() []byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.bodies[len(u.bodies)-1]
}

// streamed is what a caller's SDK made of a streamed answer.
type streamed struct {
	text, args, reasoning string
	err                   error
	errorEvent            bool // a Responses error event
}

// streamCall makes one streaming call with caller's official SDK,
// calling onText at the first text delta.
func streamCall(ctx context.Context, t *testing.T, f fixture, caller string, onText func()) streamed {
	t.Helper()
	var got streamed
	first := sync.OnceFunc(onText)
	switch caller {
	case dialects.NameChat:
		s := f.client(f.slot.Secret).Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("add 2 and 3")}})
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			chunk := s.Current()
			require.True(t, acc.AddChunk(chunk), "chunk rejected: %s", chunk.RawJSON())
			var raw struct {
				Choices []struct {
					Delta struct {
						ReasoningContent string `json:"reasoning_content"`
					} `json:"delta"`
				} `json:"choices"`
			}
			require.NoError(t, json.Unmarshal([]byte(chunk.RawJSON()), &raw))
			for _, c := range raw.Choices {
				got.reasoning += c.Delta.ReasoningContent
			}
			if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
				first()
			}
		}
		got.err = s.Err()
		if len(acc.Choices) > 0 {
			got.text = acc.Choices[0].Message.Content
			if tc := acc.Choices[0].Message.ToolCalls; len(tc) > 0 {
				got.args = tc[0].Function.Arguments
			}
		}
	case dialects.NameResponses:
		s := f.client(f.slot.Secret).Responses.NewStreaming(ctx, responses.ResponseNewParams{
			Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("add 2 and 3")}})
		var text strings.Builder
		for s.Next() {
			ev := s.Current()
			switch ev.Type {
			case "response.output_text.delta":
				text.WriteString(ev.Delta)
				first()
			case "response.reasoning_summary_text.delta":
				got.reasoning += ev.Delta
			case "response.function_call_arguments.delta":
				got.args += ev.Delta
			case "error":
				got.errorEvent = true
			case "response.completed":
				assert.Equal(t, text.String(), ev.Response.OutputText(), "response.completed holds what was streamed")
			}
		}
		got.err, got.text = s.Err(), text.String()
	case dialects.NameAnthropic:
		ac := f.anthropic(f.slot.Secret)
		s := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
			Model: "m", MaxTokens: 100, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("add 2 and 3"))}})
		var acc anthropic.Message
		for s.Next() {
			ev := s.Current()
			require.NoError(t, acc.Accumulate(ev))
			if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
				first()
			}
		}
		got.err = s.Err()
		for _, b := range acc.Content {
			switch b.Type {
			case "text":
				got.text += b.Text
			case "thinking":
				got.reasoning += b.Thinking
			case "tool_use":
				got.args = string(b.Input)
			}
		}
	}
	return got
}

// crossPairings are the caller → upstream pairings served by translation.
func crossPairings() [][2]string {
	var out [][2]string
	for _, caller := range dialects.All {
		for _, up := range dialects.All {
			if caller != up {
				out = append(out, [2]string{caller.Name(), up.Name()})
			}
		}
	}
	return out
}

// A translated call whose caller streams is streamed from the upstream's
// stream as it arrives: the caller's SDK has its first text while the
// upstream still holds its last events (the test releases them only
// then), the tool call's argument pieces assemble into the arguments,
// reasoning arrives in the caller's form, the upstream is asked for its
// usage, and the turn recorded is the one the same answer gives unstreamed.
func TestTranslatedStreamIsIncremental(t *testing.T) {
	for _, p := range crossPairings() {
		caller, up := p[0], p[1]
		t.Run(caller+"→"+up, func(t *testing.T) {
			d, err := dialects.ByName(up)
			require.NoError(t, err)
			u := newStreamingUpstream(t, d, streamAnswer(up), 4, 0)
			f := dialectFixture(t, up, u.url, nil)

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a stream replayed whole would wait here forever
			defer cancel()
			var sentAtFirstText int32 = -1
			got := streamCall(ctx, t, f, caller, func() {
				sentAtFirstText = u.sent.Load()
				close(u.gate)
			})
			require.NoError(t, got.err)
			assert.Positive(t, sentAtFirstText, "the upstream streamed")
			assert.LessOrEqual(t, int(sentAtFirstText), len(u.events)-u.held, "the caller's first text came while the upstream held its last events")
			assert.Equal(t, streamText, got.text)
			assert.JSONEq(t, streamArgs, got.args)
			assert.Equal(t, streamReasoning, got.reasoning, "reasoning streams in the caller's form")

			var sent map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(u.lastBody(), &sent))
			assert.JSONEq(t, `true`, string(sent["stream"]))
			if up == dialects.NameChat {
				assert.JSONEq(t, `{"include_usage":true}`, string(sent["stream_options"]))
			}
			streamTurn := f.turn(t)

			// The same answer, not streamed, records the same turn.
			conversationOnce(t, f, caller)
			jsonTurn := f.turn(t)
			assert.True(t, streamTurn.Streamed)
			assert.False(t, jsonTurn.Streamed)
			assert.Equal(t, http.StatusOK, streamTurn.Status)
			assert.Empty(t, streamTurn.Error)
			assert.Empty(t, streamTurn.UpstreamFailure)
			assert.Positive(t, streamTurn.TTFT)
			assert.Equal(t, jsonTurn.Response, streamTurn.Response, "the streamed turn's answer is the unstreamed one's")
			streamReq, jsonReq := streamTurn.Request, jsonTurn.Request
			streamReq.Stream, jsonReq.Stream = false, false
			assert.Equal(t, jsonReq, streamReq)
			assert.Equal(t, 120+map[bool]int{true: 64}[up == dialects.NameAnthropic], streamTurn.Response.Usage.InputTokens, "usage is carried")
			assert.Equal(t, 40, streamTurn.Response.Usage.OutputTokens)
		})
	}
}

// conversationOnce makes one call with caller's SDK, not streamed.
func conversationOnce(t *testing.T, f fixture, caller string) {
	t.Helper()
	ctx := context.Background()
	var err error
	switch caller {
	case dialects.NameChat:
		_, err = f.client(f.slot.Secret).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("add 2 and 3")}})
	case dialects.NameResponses:
		_, err = f.client(f.slot.Secret).Responses.New(ctx, responses.ResponseNewParams{
			Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("add 2 and 3")}})
	case dialects.NameAnthropic:
		ac := f.anthropic(f.slot.Secret)
		_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{
			Model: "m", MaxTokens: 100, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("add 2 and 3"))}})
	}
	require.NoError(t, err)
}

// An upstream stream that breaks after the caller had its first text
// reaches the caller as an error event in its dialect, and the turn
// records the provider's failure with what had arrived.
func TestTranslatedStreamCutMidway(t *testing.T) {
	for _, p := range crossPairings() {
		caller, up := p[0], p[1]
		t.Run(caller+"→"+up, func(t *testing.T) {
			d, err := dialects.ByName(up)
			require.NoError(t, err)
			resp := streamAnswer(up)
			var sse bytes.Buffer
			require.NoError(t, d.WriteStream(&sse, resp))
			// Cut just after the first text piece.
			cut := 0
			for i, ev := range strings.Split(strings.TrimSpace(sse.String()), "\n\n") {
				if strings.Contains(ev, `"The s`) || strings.Contains(ev, `"The `) {
					cut = i + 1
					break
				}
			}
			require.Positive(t, cut)
			u := newStreamingUpstream(t, d, resp, 0, cut)
			f := dialectFixture(t, up, u.url, nil)
			got := streamCall(context.Background(), t, f, caller, func() {})
			assert.NotEmpty(t, got.text, "the text before the cut reached the caller")
			assert.True(t, got.err != nil || got.errorEvent, "the caller's SDK sees the stream fail")
			turn := f.turn(t)
			assert.Equal(t, trace.UpstreamConnection, turn.UpstreamFailure)
			assert.Contains(t, turn.Error, "translate: upstream")
			assert.Equal(t, 1, turn.Attempts, "a stream that reached the caller is not retried")
			assert.Equal(t, got.text, turn.Response.Message.Text(), "the turn holds what had arrived")
		})
	}
}

// The token limit counts the usage a translated stream carried (chat's
// include_usage chunk, Anthropic's message_delta), and refuses the calls
// after it is reached.
func TestTranslatedStreamTokenLimit(t *testing.T) {
	for _, p := range [][2]string{{dialects.NameAnthropic, dialects.NameChat}, {dialects.NameChat, dialects.NameAnthropic}} {
		caller, up := p[0], p[1]
		t.Run(caller+"→"+up, func(t *testing.T) {
			d, err := dialects.ByName(up)
			require.NoError(t, err)
			u := newStreamingUpstream(t, d, streamAnswer(up), 0, 0)
			f := dialectFixture(t, up, u.url, nil)
			f.slot = limitedRollout(t, f, interception.Limits{Tokens: 150}) // an answer uses 160 or more
			got := streamCall(context.Background(), t, f, caller, func() {})
			require.NoError(t, got.err)
			turn := f.turn(t)
			assert.True(t, turn.Streamed)
			assert.GreaterOrEqual(t, turn.Response.Usage.InputTokens+turn.Response.Usage.OutputTokens, 160)
			got = streamCall(context.Background(), t, f, caller, func() {})
			assert.Error(t, got.err, "the call past the token limit is refused")
			assert.Equal(t, trace.LimitTokens, f.turn(t).Limit)
			assert.Len(t, u.bodies, 1, "the upstream is not called past the limit")
		})
	}
}

// An upstream stream that ends cleanly before its terminal event is a
// truncated answer: the caller gets an error event, not a finished answer.
func TestTranslatedStreamEndingEarly(t *testing.T) {
	for _, up := range []string{dialects.NameResponses, dialects.NameAnthropic} {
		t.Run("chat→"+up, func(t *testing.T) {
			d, err := dialects.ByName(up)
			require.NoError(t, err)
			u := newStreamingUpstream(t, d, streamAnswer(up), 0, 0)
			for i, ev := range u.events {
				if bytes.Contains(ev, []byte(`"The `)) {
					u.cutAfter = i + 1
					break
				}
			}
			u.endEarly = true
			f := dialectFixture(t, up, u.url, nil)
			got := streamCall(context.Background(), t, f, dialects.NameChat, func() {})
			require.Error(t, got.err)
			assert.Contains(t, got.err.Error(), "stream ended before its last event")
			turn := f.turn(t)
			assert.Equal(t, trace.UpstreamTruncated, turn.UpstreamFailure)
		})
	}
}
