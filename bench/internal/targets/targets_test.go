package targets_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/bench/internal/loadgen"
	"github.com/evalflow/evalflow/bench/internal/targets"
	"github.com/evalflow/evalflow/bench/internal/upstream"
)

// mock starts the benchmark mock and returns its base URL.
func mock(t *testing.T, cfg upstream.Config) string {
	t.Helper()
	base, closeFn, err := upstream.Listen(upstream.New(cfg), true)
	require.NoError(t, err)
	t.Cleanup(func() { _ = closeFn() })
	return base
}

// relay starts an interception server whose upstream speaks dialect.
func relay(t *testing.T, dialect, base string) *targets.Interception {
	t.Helper()
	up, err := targets.Upstream(dialect, base, false)
	require.NoError(t, err)
	i, err := targets.NewInterception(up)
	require.NoError(t, err)
	t.Cleanup(func() { _ = i.Close() })
	return i
}

// TestSDKsReadTheMock reads the mock's three dialects, streamed and not,
// with the official SDKs, straight and through the relay arm.
func TestSDKsReadTheMock(t *testing.T) {
	base := mock(t, upstream.Config{BodyBytes: 1000, Events: 5})
	ctx := context.Background()
	for _, via := range []string{"direct", "relay"} {
		t.Run(via, func(t *testing.T) {
			urlOf := func(dialect string) (string, string) {
				if via == "direct" {
					return base, "sk-bench"
				}
				i := relay(t, dialect, base)
				return i.Srv.LocalURL(), i.Header().Get("X-Api-Key")
			}

			url, key := urlOf(targets.Chat)
			oc := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
			chat, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model: "caller", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			})
			require.NoError(t, err)
			assert.Len(t, chat.Choices[0].Message.Content, 700)
			s := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
				Model: "caller", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			})
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			require.NoError(t, s.Err())
			assert.Equal(t, 5, strings.Count(acc.Choices[0].Message.Content, "@@")/2)

			url, key = urlOf(targets.Responses)
			rc := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
			params := responses.ResponseNewParams{Model: "caller", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
			resp, err := rc.Responses.New(ctx, params)
			require.NoError(t, err)
			assert.Len(t, resp.OutputText(), 700)
			rs := rc.Responses.NewStreaming(ctx, params)
			deltas := 0
			for rs.Next() {
				if rs.Current().Type == "response.output_text.delta" {
					deltas++
				}
			}
			require.NoError(t, rs.Err())
			assert.Equal(t, 5, deltas)

			url, key = urlOf(targets.Anthropic)
			ac := anthropic.NewClient(aoption.WithBaseURL(url), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
			mp := anthropic.MessageNewParams{
				Model: "caller", MaxTokens: 64,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
			}
			msg, err := ac.Messages.New(ctx, mp)
			require.NoError(t, err)
			assert.Len(t, msg.Content[0].Text, 700)
			as := ac.Messages.NewStreaming(ctx, mp)
			var m anthropic.Message
			for as.Next() {
				require.NoError(t, m.Accumulate(as.Current()))
			}
			require.NoError(t, as.Err())
			assert.Equal(t, 5, strings.Count(m.Content[0].Text, "@@")/2)
		})
	}
}

// TestStreamsArriveWhole checks that the load generator sees every event of
// every dialect through the relay, in order, none merged, and that every
// call is recorded as a turn.
func TestStreamsArriveWhole(t *testing.T) {
	base := mock(t, upstream.Config{Events: 8, Gap: 5 * time.Millisecond})
	c := loadgen.NewClient(8)
	for _, d := range []string{targets.Chat, targets.Responses, targets.Anthropic} {
		t.Run(d, func(t *testing.T) {
			i := relay(t, d, base)
			body := targets.Body(d, 200, true)
			for _, tg := range []loadgen.Target{targets.Direct("direct", base, d, body), i.Target("relay", d, body)} {
				r, err := c.Stream(context.Background(), tg, 8)
				require.NoError(t, err)
				assert.Equal(t, 8, r.Events, "%s events", tg.Name)
				assert.Zero(t, r.Lost, "%s lost", tg.Name)
				assert.Len(t, r.Delays, 8)
			}
			turns, errored := i.Turns()
			assert.Equal(t, 1, turns)
			assert.Zero(t, errored)
		})
	}
}

// TestTurnsCountsRotatedRollouts checks that Turns counts every call, those
// of rollouts dropped in the background included.
func TestTurnsCountsRotatedRollouts(t *testing.T) {
	const calls = 40
	base := mock(t, upstream.Config{BodyBytes: 200})
	i := relay(t, targets.Chat, base)
	i.Rollouts, i.Rotate = 2, 3
	c := loadgen.NewClient(4)
	tg := i.Target("relay", targets.Chat, targets.Body(targets.Chat, 200, false))
	for range calls {
		_, err := c.Do(context.Background(), tg)
		require.NoError(t, err)
	}
	tg.Settle()
	// Only the two in flight (at most three turns each) are left.
	assert.GreaterOrEqual(t, i.Parsed(), calls-2*3)
	turns, errored := i.Turns()
	assert.Equal(t, calls, turns)
	assert.Zero(t, errored)
}
