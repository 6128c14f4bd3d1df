package interception_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/internal/prices"
	"github.com/evalflow/evalflow/trace"
)

// costPrice is the test's price of runModel, the only model it prices.
var costPrice = prices.Price{Input: 3, Output: 15}

// usageCall makes one call in a dialect with its official SDK, streamed or
// not, and returns the input and output tokens the SDK read from the answer.
func usageCall(t *testing.T, caller, base, secret string, stream bool) (in, out int64) {
	t.Helper()
	ctx := context.Background()
	switch caller {
	case dialects.NameChat:
		c := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey(secret), option.WithMaxRetries(0))
		p := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)}}
		if !stream {
			r, err := c.Chat.Completions.New(ctx, p)
			require.NoError(t, err)
			return r.Usage.PromptTokens, r.Usage.CompletionTokens
		}
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := c.Chat.Completions.NewStreaming(ctx, p)
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		require.NoError(t, s.Err())
		return acc.Usage.PromptTokens, acc.Usage.CompletionTokens
	case dialects.NameResponses:
		c := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey(secret), option.WithMaxRetries(0))
		p := responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(question)}}
		if !stream {
			r, err := c.Responses.New(ctx, p)
			require.NoError(t, err)
			return r.Usage.InputTokens, r.Usage.OutputTokens
		}
		s := c.Responses.NewStreaming(ctx, p)
		for s.Next() {
			if ev := s.Current(); ev.Type == "response.completed" {
				in, out = ev.Response.Usage.InputTokens, ev.Response.Usage.OutputTokens
			}
		}
		require.NoError(t, s.Err())
		return in, out
	default:
		c := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey(secret), aoption.WithMaxRetries(0))
		p := anthropic.MessageNewParams{Model: "m", MaxTokens: 100,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(question))}}
		if !stream {
			r, err := c.Messages.New(ctx, p)
			require.NoError(t, err)
			return r.Usage.InputTokens, r.Usage.OutputTokens
		}
		s := c.Messages.NewStreaming(ctx, p)
		var msg anthropic.Message
		for s.Next() {
			require.NoError(t, msg.Accumulate(s.Current()))
		}
		require.NoError(t, s.Err())
		return msg.Usage.InputTokens, msg.Usage.OutputTokens
	}
}

// Every turn is priced from the usage the provider reported, streamed or
// not, relayed to an upstream of the caller's dialect or translated to a
// chat one: the cost the trace keeps is the usage the SDK read at the
// table's price, never 0.
func TestTurnCostFromUsageInEveryDialect(t *testing.T) {
	for _, caller := range []string{dialects.NameChat, dialects.NameResponses, dialects.NameAnthropic} {
		ups := []string{caller}
		if caller != dialects.NameChat {
			ups = append(ups, dialects.NameChat)
		}
		for _, up := range ups {
			for _, stream := range []bool{false, true} {
				arm := "relay"
				if up != caller {
					arm = "translate"
				}
				t.Run(fmt.Sprintf("%s/%s/stream=%v", caller, arm, stream), func(t *testing.T) {
					f := dialectFixture(t, up, mockUpstream(t), func(c *interception.Config) {
						c.Prices = prices.Table{runModel: costPrice}
					})
					in, out := usageCall(t, caller, f.slot.LocalURL, f.slot.Secret, stream)
					require.Positive(t, in+out, "the mock reports usage")
					turn := f.turn(t)
					assert.Equal(t, stream, turn.Streamed)
					assert.EqualValues(t, in, turn.Response.Usage.InputTokens, "the turn keeps the usage the caller got")
					assert.EqualValues(t, out, turn.Response.Usage.OutputTokens)
					require.NotNil(t, turn.CostUSD, "a priced model's turn has a cost")
					assert.InDelta(t, costPrice.Cost(turn.Response.Usage), *turn.CostUSD, 1e-15)
					assert.Positive(t, *turn.CostUSD)
					assert.False(t, turn.Unpriced())
				})
			}
		}
	}
}

// A turn of a model the table does not price has no cost, and says so.
func TestTurnOfAnUnpricedModelHasNoCost(t *testing.T) {
	f := dialectFixture(t, dialects.NameChat, mockUpstream(t), func(c *interception.Config) {
		c.Prices = prices.Table{"another-model": costPrice}
	})
	usageCall(t, dialects.NameChat, f.slot.LocalURL, f.slot.Secret, false)
	turn := f.turn(t)
	assert.Nil(t, turn.CostUSD)
	assert.True(t, turn.Unpriced(), "its cost is unknown, not 0")
	usd, unpriced := trace.Cost([]trace.Turn{turn})
	assert.Zero(t, usd)
	assert.Equal(t, 1, unpriced)
}

// --max-cost refuses the calls after the rollout's calls cost it, in every
// dialect, relayed (the answer parsed for it) or translated; the refused
// turn says limit cost and the upstream is not called.
func TestCostLimitInEveryDialect(t *testing.T) {
	for _, caller := range []string{dialects.NameChat, dialects.NameResponses, dialects.NameAnthropic} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", caller, stream), func(t *testing.T) {
				var calls atomic.Int32
				f := dialectFixture(t, dialects.NameChat, countedMock(t, &calls), func(c *interception.Config) {
					c.Prices = prices.Table{runModel: costPrice}
				})
				limited := limitedRollout(t, f, interception.Limits{CostUSD: 1e-9})
				secret := limited.Secret
				usageCall(t, caller, f.slot.LocalURL, secret, stream)
				<-f.recorded // the next call is admitted once this one's cost is in
				status, body := refusal(t, callers[caller](f.slot.LocalURL, secret))
				assert.Equal(t, http.StatusBadRequest, status)
				assert.Contains(t, body, "rollout limit reached: $")
				assert.Contains(t, body, "(--max-cost 1e-09)")
				assert.Equal(t, int32(1), calls.Load(), "the upstream is not called past the limit")
				<-f.recorded
				turns, ok := limited.Turns()
				require.True(t, ok)
				require.Len(t, turns, 2)
				require.NotNil(t, turns[0].CostUSD)
				assert.Empty(t, turns[0].Limit)
				assert.Equal(t, trace.LimitCost, turns[1].Limit)
				assert.Nil(t, turns[1].CostUSD, "a refused call costs nothing")
			})
		}
	}
}

// A chat stream relayed as its caller sent it, without asking for usage,
// reports none: its cost is unknown, never taken for 0.
func TestChatStreamWithoutUsageHasAnUnknownCost(t *testing.T) {
	f := dialectFixture(t, dialects.NameChat, mockUpstream(t), func(c *interception.Config) {
		c.Prices = prices.Table{runModel: costPrice}
	})
	c := openai.NewClient(option.WithBaseURL(f.slot.LocalURL+"/v1/"), option.WithAPIKey(f.slot.Secret), option.WithMaxRetries(0))
	s := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)}})
	for s.Next() {
	}
	require.NoError(t, s.Err())
	turn := f.turn(t)
	require.Equal(t, http.StatusOK, turn.Status)
	assert.Zero(t, turn.Response.Usage.InputTokens+turn.Response.Usage.OutputTokens, "the provider reported no usage")
	assert.Nil(t, turn.CostUSD)
	assert.True(t, turn.Unpriced(), "an answer without usage has an unknown cost")
}

// Cached input and cache writes are priced at their own prices, from the
// counts each dialect's answer reports, relayed whole or streamed.
func TestCacheTokensPricedAtTheirPrices(t *testing.T) {
	cached, write := 0.3, 3.75
	price := prices.Price{Input: 3, CachedInput: &cached, CacheWrite: &write, Output: 15}
	const (
		message = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,` +
			`"usage":{"input_tokens":10,"cache_read_input_tokens":1000,"cache_creation_input_tokens":200,"output_tokens":7}}`
		events = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null," +
			"\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":1000,\"cache_creation_input_tokens\":200,\"output_tokens\":1}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":7}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	)
	want := (10*3 + 1000*cached + 200*write + 7*15) / 1e6
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				if stream {
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = w.Write([]byte(events))
					return
				}
				writeJSON(w, http.StatusOK, message)
			})
			f := dialectFixture(t, dialects.NameAnthropic, up.URL, func(c *interception.Config) {
				c.Prices = prices.Table{"claude-x": price}
			})
			in, out := usageCall(t, dialects.NameAnthropic, f.slot.LocalURL, f.slot.Secret, stream)
			assert.EqualValues(t, 10, in, "the caller gets the answer as the provider sent it")
			assert.EqualValues(t, 7, out)
			turn := f.turn(t)
			u := turn.Response.Usage
			assert.Equal(t, 1210, u.InputTokens, "input counts cached input, as OpenAI's does")
			assert.Equal(t, 1000, u.CacheReadTokens)
			assert.Equal(t, 200, u.CacheWriteTokens)
			require.NotNil(t, turn.CostUSD)
			assert.InDelta(t, want, *turn.CostUSD, 1e-15)
		})
	}
}
