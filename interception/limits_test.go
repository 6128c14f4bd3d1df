package interception_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/trace"
)

// limitedKey is the rollout a limits test acquires beside the fixture's.
const limitedKey = "run/0/0/1"

// callers make one model call in each dialect with its official SDK, on
// its default retries, and return the call's error.
var callers = map[string]func(base, secret string) error{
	dialects.NameChat: func(base, secret string) error {
		c := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey(secret))
		_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)}})
		return err
	},
	dialects.NameResponses: func(base, secret string) error {
		c := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey(secret))
		_, err := c.Responses.New(context.Background(), responses.ResponseNewParams{
			Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(question)}})
		return err
	},
	dialects.NameAnthropic: func(base, secret string) error {
		c := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey(secret))
		_, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{
			Model: "m", MaxTokens: 100, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(question))}})
		return err
	},
}

// countedMock starts the offline mock model behind a counter of the calls
// it gets, and returns its /v1 URL.
func countedMock(t *testing.T, calls *atomic.Int32) string {
	t.Helper()
	m, err := mock.New(mock.Config{})
	require.NoError(t, err)
	return upstream(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		m.ServeHTTP(w, r)
	}).URL + "/v1"
}

// limitedRollout acquires a rollout under limits l in f's pool.
func limitedRollout(t *testing.T, f fixture, l interception.Limits) *interception.Registration {
	t.Helper()
	reg, err := f.pool.Acquire(context.Background(), interception.Rollout{Key: limitedKey, Model: runModel, Limits: l})
	require.NoError(t, err)
	return reg
}

// refusal is the status and JSON body of an SDK's error, of either SDK.
func refusal(t *testing.T, err error) (int, string) {
	t.Helper()
	var oa *openai.Error
	if errors.As(err, &oa) {
		return oa.StatusCode, oa.RawJSON()
	}
	var an *anthropic.Error
	require.ErrorAs(t, err, &an, "an SDK's error")
	return an.StatusCode, an.RawJSON()
}

// refusals are a refusal's error body in each dialect's shape, for msg.
func refusals(msg string) map[string]string {
	openaiShape := `{"message":` + strconv.Quote(msg) + `,"type":"invalid_request_error","param":null,"code":"rollout_limit_reached"}`
	return map[string]string{
		dialects.NameChat:      openaiShape,
		dialects.NameResponses: openaiShape,
		dialects.NameAnthropic: `{"type":"error","error":{"type":"invalid_request_error","message":` + strconv.Quote(msg) + `}}`,
	}
}

// A harness that keeps calling past --max-turns gets, from the call after
// the limit on, an error in its own dialect, the upstream is not called
// again, and the refused turns record the limit. Chat callers are relayed
// to the chat mock, the others translated.
func TestTurnLimitInEveryDialect(t *testing.T) {
	for _, caller := range []string{dialects.NameChat, dialects.NameResponses, dialects.NameAnthropic} {
		t.Run(caller, func(t *testing.T) {
			var calls atomic.Int32
			f := dialectFixture(t, dialects.NameChat, countedMock(t, &calls), nil)
			limited := limitedRollout(t, f, interception.Limits{Turns: 2})
			secret := limited.Secret
			call := callers[caller]
			require.NoError(t, call(f.slot.LocalURL, secret))
			require.NoError(t, call(f.slot.LocalURL, secret))
			for range 2 {
				status, body := refusal(t, call(f.slot.LocalURL, secret))
				assert.Equal(t, http.StatusBadRequest, status)
				assert.JSONEq(t, refusals("rollout limit reached: 2 model calls (--max-turns 2)")[caller], body)
			}
			assert.Equal(t, int32(2), calls.Load(), "the upstream is not called past the limit")

			for range 4 {
				<-f.recorded
			}
			turns, ok := limited.Turns()
			require.True(t, ok)
			require.Len(t, turns, 4, "the SDK did not retry a refusal")
			for i, turn := range turns {
				if i < 2 {
					assert.Empty(t, turn.Limit, "turn %d", i)
					assert.Equal(t, http.StatusOK, turn.Status, "turn %d", i)
					continue
				}
				assert.Equal(t, trace.LimitTurns, turn.Limit, "turn %d", i)
				assert.Equal(t, http.StatusBadRequest, turn.Status, "turn %d", i)
				assert.Zero(t, turn.Attempts, "turn %d", i)
				assert.Equal(t, caller, turn.Dialect, "turn %d", i)
			}
		})
	}
}

// The token limit adds up the usage of the answers, relayed (parsed for
// it) or translated, and refuses the calls after it is reached; the model
// time limit does the same with the calls' time.
func TestTokenAndModelTimeLimits(t *testing.T) {
	for _, tt := range []struct {
		name, caller string
		limits       interception.Limits
		which        string
		msg          string
	}{
		// toolCompletion uses 18 tokens a call.
		{"tokens/relay", dialects.NameChat, interception.Limits{Tokens: 30}, trace.LimitTokens, "rollout limit reached: 36 tokens (--max-tokens-total 30)"},
		{"tokens/translate", dialects.NameAnthropic, interception.Limits{Tokens: 30}, trace.LimitTokens, "rollout limit reached: 36 tokens (--max-tokens-total 30)"},
		{"model time", dialects.NameResponses, interception.Limits{ModelTime: time.Nanosecond}, trace.LimitModelTime, "of model calls (--max-model-time 1ns)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				writeJSON(w, http.StatusOK, toolCompletion)
			})
			f := newFixture(t, up.URL, nil)
			limited := limitedRollout(t, f, tt.limits)
			secret := limited.Secret
			call := callers[tt.caller]
			allowed := 2
			if tt.limits.ModelTime > 0 {
				allowed = 1
			}
			for range allowed {
				require.NoError(t, call(f.slot.LocalURL, secret))
				<-f.recorded // the next call is admitted once this one's usage is in
			}
			status, body := refusal(t, call(f.slot.LocalURL, secret))
			assert.Equal(t, http.StatusBadRequest, status)
			assert.Contains(t, body, tt.msg)
			assert.Equal(t, int32(allowed), calls.Load(), "the upstream is not called past the limit")
			<-f.recorded
			turns, ok := limited.Turns()
			require.True(t, ok)
			require.Len(t, turns, allowed+1)
			assert.Equal(t, tt.which, turns[allowed].Limit)
		})
	}
}

// A body the interception refuses itself (not JSON) never reaches the
// upstream and costs the rollout no turn: a harness's malformed calls do
// not use up its model calls.
func TestRefusedBodiesCostNoTurn(t *testing.T) {
	var calls atomic.Int32
	f := dialectFixture(t, dialects.NameChat, countedMock(t, &calls), nil)
	limited := limitedRollout(t, f, interception.Limits{Turns: 2})
	secret := limited.Secret
	for range 3 {
		req, err := http.NewRequest(http.MethodPost, f.slot.LocalURL+"/v1/chat/completions", strings.NewReader("not json {"))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	}
	call := callers[dialects.NameChat]
	require.NoError(t, call(f.slot.LocalURL, secret), "the refused bodies took no turn")
	require.NoError(t, call(f.slot.LocalURL, secret))
	status, _ := refusal(t, call(f.slot.LocalURL, secret))
	assert.Equal(t, http.StatusBadRequest, status, "the limit still holds for model calls")
	assert.Equal(t, int32(2), calls.Load())
}
