package dialects_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
)

// translateStream writes a captured stream of from for a caller of to,
// event by event, as the translate arm does, and returns the caller's
// events.
func translateStream(t *testing.T, from, to dialects.Dialect, capture []byte) (dialects.Response, [][]byte) {
	t.Helper()
	var out bytes.Buffer
	stream, sw := from.NewStream(), to.NewStreamWriter(&out)
	for _, data := range sseData(t, capture) {
		require.NoError(t, stream.Add(data))
		for _, ev := range stream.Events() {
			require.NoError(t, sw.Emit(ev))
		}
		if stream.Done() {
			require.NoError(t, sw.Emit(dialects.Event{Type: dialects.EventFinish, Response: stream.Response()}))
			break
		}
	}
	require.True(t, stream.Done())
	return stream.Response(), sseData(t, out.Bytes())
}

// Every provider's captured stream, written event by event for a caller
// of every dialect, reads back (through the caller's own assembler and
// official SDK) as the answer the whole-response path gives the same
// caller, reasoning, tool calls and usage included.
func TestStreamWriterTranslatesCaptures(t *testing.T) {
	for _, from := range dialects.All {
		for _, to := range dialects.All {
			t.Run(from.Name()+"→"+to.Name(), func(t *testing.T) {
				answer, events := translateStream(t, from, to, golden(t, from.Name()+"_stream.sse"))
				got := to.NewStream()
				for _, data := range events {
					require.NoError(t, got.Add(data))
				}
				require.True(t, got.Done(), "the caller's stream ends")

				var whole bytes.Buffer
				require.NoError(t, to.WriteStream(&whole, answer))
				want := to.NewStream()
				for _, data := range sseData(t, whole.Bytes()) {
					require.NoError(t, want.Add(data))
				}
				assert.Equal(t, compactArgs(want.Response()), compactArgs(got.Response()),
					"streamed event by event = written whole")
				assert.Equal(t, answer.Message.Reasoning, got.Response().Message.Reasoning)
				assert.Equal(t, answer.Usage.OutputTokens, got.Response().Usage.OutputTokens)
				sdkStream(t, to, events, answer)
			})
		}
	}
}

// Pieces of two tool calls interleaved by the upstream (chat numbers its
// calls, and may) still assemble into each call's own arguments.
func TestStreamWriterInterleavedToolCalls(t *testing.T) {
	evs := []dialects.Event{
		{Type: dialects.EventStart, Response: dialects.Response{ID: "x", Model: "m"}},
		{Type: dialects.EventToolCall, Index: 0, ToolCall: dialects.ToolCall{ID: "a", Name: "add"}},
		{Type: dialects.EventToolCall, Index: 1, ToolCall: dialects.ToolCall{ID: "b", Name: "mul"}},
		{Type: dialects.EventToolArgs, Index: 0, Delta: `{"a":`},
		{Type: dialects.EventToolArgs, Index: 1, Delta: `{"b":`},
		{Type: dialects.EventToolArgs, Index: 0, Delta: `1}`},
		{Type: dialects.EventToolArgs, Index: 1, Delta: `2}`},
	}
	final := dialects.Response{ID: "x", Model: "m", FinishReason: dialects.FinishToolCalls, Message: dialects.Message{
		Role: dialects.RoleAssistant, ToolCalls: []dialects.ToolCall{{ID: "a", Name: "add", Arguments: `{"a":1}`}, {ID: "b", Name: "mul", Arguments: `{"b":2}`}}}}
	evs = append(evs, dialects.Event{Type: dialects.EventFinish, Response: final})
	for _, to := range dialects.All {
		t.Run(to.Name(), func(t *testing.T) {
			var out bytes.Buffer
			sw := to.NewStreamWriter(&out)
			for _, ev := range evs {
				require.NoError(t, sw.Emit(ev))
			}
			s := to.NewStream()
			for _, data := range sseData(t, out.Bytes()) {
				require.NoError(t, s.Add(data))
			}
			assert.Equal(t, final.Message.ToolCalls, s.Response().Message.ToolCalls)
		})
	}
}
