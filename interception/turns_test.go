package interception_test

import (
	"cmp"
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/trace"
)

// TestRelayTurnsParsedWhenRead checks that a relayed turn, parsed only when
// read, carries the request as the upstream saw it and the answer the
// caller got, alike through OnTurn, Pool.Turns and Pool.Finish.
func TestRelayTurnsParsedWhenRead(t *testing.T) {
	tests := []struct {
		name, dialect, path, body string
		anthropicCarrier          bool
		stream                    bool
		status                    int // of the answer; 200 when 0
	}{
		{name: "chat", dialect: dialects.NameChat, path: "/v1/chat/completions",
			body: `{"model":"caller","temperature":1.5,"messages":[{"role":"user","content":"what is 2+3?"}]}`},
		{name: "chat/sse", dialect: dialects.NameChat, path: "/v1/chat/completions", stream: true,
			body: `{"model":"caller","stream":true,"messages":[{"role":"user","content":"what is 2+3?"}]}`},
		{name: "responses", dialect: dialects.NameResponses, path: "/v1/responses",
			body: `{"model":"caller","input":"what is 2+3?"}`},
		{name: "responses/sse", dialect: dialects.NameResponses, path: "/v1/responses", stream: true,
			body: `{"model":"caller","stream":true,"input":"what is 2+3?"}`},
		{name: "anthropic", dialect: dialects.NameAnthropic, path: "/v1/messages", anthropicCarrier: true,
			body: `{"model":"caller","max_tokens":64,"messages":[{"role":"user","content":"what is 2+3?"}]}`},
		{name: "anthropic/sse", dialect: dialects.NameAnthropic, path: "/v1/messages", anthropicCarrier: true, stream: true,
			body: `{"model":"caller","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"what is 2+3?"}]}`},
		{name: "anthropic/refused", dialect: dialects.NameAnthropic, path: "/v1/messages", anthropicCarrier: true, status: http.StatusBadRequest,
			body: `{"model":"caller","messages":[{"role":"user","content":"what is 2+3?"}]}`}, // no max_tokens
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := dialects.ByName(tt.dialect)
			require.NoError(t, err)
			f := dialectFixture(t, tt.dialect, mockUpstream(t), nil)
			resp, got := f.post(t, tt.path, tt.body, tt.anthropicCarrier)
			require.Equal(t, cmp.Or(tt.status, http.StatusOK), resp.StatusCode, got)

			want, err := d.ParseRequest([]byte(tt.body))
			require.NoError(t, err)
			want.Model, want.Sampling.Temperature = runModel, ptr(0.25)

			onTurn := <-f.recorded
			turns, ok := f.slot.Turns()
			require.True(t, ok)
			require.Len(t, turns, 1)
			finished, ok := f.slot.Finish()
			require.True(t, ok)
			require.Len(t, finished, 1)
			assert.Equal(t, onTurn, turns[0], "OnTurn and Turns")
			assert.Equal(t, turns[0], finished[0], "Turns and Finish")

			turn := turns[0]
			assert.Equal(t, want, turn.Request)
			assert.Equal(t, tt.stream, turn.Streamed)
			assert.Equal(t, resp.StatusCode, turn.Status)
			switch {
			case resp.StatusCode != http.StatusOK:
				assert.Equal(t, d.ParseError(resp.StatusCode, []byte(got)).Error(), turn.Error)
			case tt.stream:
				assert.Empty(t, turn.Error)
				assert.NotEmpty(t, turn.Response.FinishReason, "assembled from the stream")
			default:
				answer, err := d.ParseResponse([]byte(got))
				require.NoError(t, err)
				assert.Equal(t, answer, turn.Response)
				assert.Empty(t, turn.Error)
			}
		})
	}
}

// TestTurnsReadWhileCalling reads a rollout's turns from two readers while
// calls record more: every turn a reader sees is parsed, and the same turn
// reads alike every time and in the end.
func TestTurnsReadWhileCalling(t *testing.T) {
	const callers, calls = 4, 8
	f := dialectFixture(t, dialects.NameChat, mockUpstream(t), func(c *interception.Config) { c.OnTurn = nil })
	c := f.client(f.slot.Secret)

	done := make(chan struct{})
	seen := make([]map[int]trace.Turn, 2)
	var readers sync.WaitGroup
	for r := range seen {
		seen[r] = make(map[int]trace.Turn)
		readers.Go(func() {
			for {
				turns, ok := f.slot.Turns()
				require.True(t, ok)
				for _, turn := range turns {
					if prev, ok := seen[r][turn.Index]; ok {
						assert.Equal(t, prev, turn, "turn %d read again", turn.Index)
					}
					seen[r][turn.Index] = turn
				}
				select {
				case <-done:
					return
				default:
				}
			}
		})
	}
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range calls {
				_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
					Model:    "caller-model",
					Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("what is 2+3?")},
				})
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	close(done)
	readers.Wait()

	turns, ok := f.slot.Finish()
	require.True(t, ok)
	require.Len(t, turns, callers*calls)
	for i, turn := range turns {
		assert.Equal(t, i, turn.Index)
		assert.Equal(t, runModel, turn.Request.Model, "turn %d request", i)
		assert.Contains(t, turn.Response.Message.Text(), "5", "turn %d answer", i)
		assert.Empty(t, turn.Error, "turn %d", i)
		for r := range seen {
			if prev, ok := seen[r][i]; ok {
				assert.Equal(t, prev, turn, "turn %d as reader %d saw it", i, r)
			}
		}
	}
}
