package interception_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/interception/gateway"
	"github.com/evalflow/evalflow/internal/logtest"
	"github.com/evalflow/evalflow/providers/mock"
)

// seedRegister is a register body as verifiers' RolloutGatewayMixin sends
// it (model, sampling parameters by prime-rl's name, max turns, max
// sequence length), with evalflow's policy version and staleness bound.
const seedRegister = `{"model":"policy-7","sampling_params":{"temperature":0.25,"max_tokens":200,"logprobs":true},` +
	`"max_turns":4,"max_seq_len":4096,"policy_version":3,"max_off_policy_steps":1}`

// An environment written to seed 001's contract registers, points its
// agent's SDK at {gateway}/v1/rollouts/{id} with the gateway token as its
// key, and reads verifiers' trajectory: steps with token ids, masks and
// log probabilities that extend each other exactly, the interleaved
// sample, the policy version, staleness at the trainer's version. Both on
// the worker's stable address and on an interception server's own.
func TestGatewaySeedContract(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		up := newRecordingMock(t)
		g := newGatewayRigAt(t, 4, up.root)
		seedRollout(t, g.addr, up)
	})
	t.Run("on an interception server", func(t *testing.T) {
		up := newRecordingMock(t)
		var logs logtest.Buffer
		f := newFixture(t, up.root, func(c *interception.Config) {
			c.GatewayToken = gatewayToken
			c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		})
		secret := seedRollout(t, f.slot.LocalURL, up)
		require.Contains(t, logs.String(), "model call", "the calls are logged")
		assert.NotContains(t, logs.String(), gatewayToken, "no log line holds the gateway token")
		assert.NotContains(t, logs.String(), secret, "no log line holds the rollout's secret")
	})
}

// seedRollout runs a rollout at the gateway gw as a seed-written
// environment does, and returns the rollout's secret.
func seedRollout(t *testing.T, gw string, up *recordingMock) string {
	root := gw + "/v1/rollouts/seed-1"
	status, body := gatewayCall(t, http.MethodPost, root+"/register", gatewayToken,
		`{"model":"policy-7","sampling":{},"sampling_params":{}}`)
	require.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, string(body), "sampling and sampling_params")
	status, body = gatewayCall(t, http.MethodPost, root+"/register", gatewayToken, seedRegister)
	require.Equal(t, http.StatusOK, status, string(body))
	var reg gateway.Registration
	require.NoError(t, json.Unmarshal(body, &reg))
	require.NotEmpty(t, reg.APIKey)

	// The agent: OPENAI_BASE_URL={gateway}/v1/rollouts/{id}, the one key
	// the environment has.
	agent := openai.NewClient(option.WithBaseURL(root), option.WithAPIKey(gatewayToken), option.WithMaxRetries(0))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:    "whatever-the-agent-says",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 2 + 3?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(
			shared.FunctionDefinitionParam{Name: "calculator", Parameters: calculatorParams})},
	}
	first, err := agent.Chat.Completions.New(ctx, params)
	require.NoError(t, err)
	require.Len(t, first.Choices, 1)
	require.Len(t, first.Choices[0].Message.ToolCalls, 1, "the mock calls the calculator")
	call := first.Choices[0].Message.ToolCalls[0]
	params.Messages = append(params.Messages, first.Choices[0].Message.ToParam(), openai.ToolMessage("5", call.ID))
	second, err := agent.Chat.Completions.New(ctx, params)
	require.NoError(t, err)
	assert.Equal(t, "The answer is 5.", second.Choices[0].Message.Content)

	models, err := agent.Models.List(ctx)
	require.NoError(t, err)
	var ids []string
	for _, m := range models.Data {
		ids = append(ids, m.ID)
	}
	assert.Contains(t, ids, "policy-7", "GET {base}/models")

	wrong := openai.NewClient(option.WithBaseURL(root), option.WithAPIKey("not-a-key-of-ours"), option.WithMaxRetries(0))
	_, err = wrong.Chat.Completions.New(ctx, params)
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusUnauthorized, apiErr.StatusCode, "neither the rollout's secret nor the gateway token")

	bodies, keys := up.seen()
	require.Len(t, bodies, 2, "the refused call never reached the upstream")
	for i, b := range bodies {
		assert.Equal(t, "policy-7", b["model"], "call %d: the registered model", i)
		assert.Equal(t, 0.25, b["temperature"], "call %d: sampling_params reach the upstream", i)
		assert.EqualValues(t, 200, b["max_tokens"], "call %d", i)
		assert.Equal(t, true, b["logprobs"], "call %d: token data is asked for", i)
		assert.Equal(t, "Bearer upstream-key", keys[i], "call %d: the upstream gets its own key, not the gateway token", i)
	}

	checkSeedTrajectory(t, root, reg, call.Function.Arguments)
	checkSeedAnthropic(t, root)

	status, body = gatewayCall(t, http.MethodPost, root+"/unregister", gatewayToken, "")
	require.Equal(t, http.StatusOK, status, string(body))
	var tr gateway.Trajectory
	require.NoError(t, json.Unmarshal(body, &tr))
	assert.Len(t, tr.Trajectory, 3, "unregister answers with the trajectory, the Anthropic call's step included")
	_, err = agent.Chat.Completions.New(ctx, params)
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusNotFound, apiErr.StatusCode, "the rollout is gone, the gateway token opens nothing")
	return reg.APIKey
}

// checkSeedTrajectory reads the seed rollout's trajectory as a trainer
// does: its steps, their token data and masks, the interleaved sample,
// staleness by the trainer's version; callArgs are the tool call's
// arguments the mock sampled.
func checkSeedTrajectory(t *testing.T, root string, reg gateway.Registration, callArgs string) {
	t.Helper()
	status, body := gatewayCall(t, http.MethodGet, root+"/trajectory?policy_version=4", gatewayToken, "")
	require.Equal(t, http.StatusOK, status, string(body))
	assert.NotContains(t, string(body), gatewayToken, "the gateway token is recorded nowhere")
	assert.NotContains(t, string(body), reg.APIKey, "nor the rollout's secret")
	var tr gateway.Trajectory
	require.NoError(t, json.Unmarshal(body, &tr))
	assert.False(t, tr.IsTruncated)
	require.Len(t, tr.Prompt, 1)
	assert.Equal(t, "What is 2 + 3?", tr.Prompt[0].Text())
	require.NotEmpty(t, tr.Completion)
	assert.Equal(t, "The answer is 5.", tr.Completion[len(tr.Completion)-1].Text())

	require.Len(t, tr.Trajectory, 2)
	for i, s := range tr.Trajectory {
		require.NotNil(t, s.Tokens, "step %d has token data", i)
		assert.NotEmpty(t, s.Tokens.PromptIDs, "step %d", i)
		assert.Equal(t, make([]int, len(s.Tokens.PromptIDs)), s.Tokens.PromptMask, "step %d: the prompt is not learned from", i)
		require.NotEmpty(t, s.Tokens.CompletionIDs, "step %d", i)
		assert.Equal(t, ones(len(s.Tokens.CompletionIDs)), s.Tokens.CompletionMask, "step %d: the completion is", i)
		require.Len(t, s.Tokens.CompletionLogprobs, len(s.Tokens.CompletionIDs), "step %d", i)
		for j, lp := range s.Tokens.CompletionLogprobs {
			assert.InDelta(t, mock.Logprob(j), lp, 1e-6, "step %d token %d", i, j)
		}
		require.NotNil(t, s.PolicyVersion, "step %d", i)
		assert.Equal(t, int64(3), *s.PolicyVersion, "step %d: the registered policy version", i)
		require.NotNil(t, s.OffPolicySteps, "step %d", i)
		assert.Equal(t, int64(1), *s.OffPolicySteps, "step %d", i)
	}
	assert.Equal(t, dialects.FinishToolCalls, tr.Trajectory[0].FinishReason)
	require.Len(t, tr.Trajectory[0].Completion, 1)
	require.Len(t, tr.Trajectory[0].Completion[0].ToolCalls, 1, "step 0's completion is the tool call")
	assert.Equal(t, mock.TokenIDs("calculator"+callArgs), tr.Trajectory[0].Tokens.CompletionIDs)
	assert.Equal(t, mock.TokenIDs("The answer is 5."), tr.Trajectory[1].Tokens.CompletionIDs)
	assert.False(t, tr.Trajectory[0].ExtendsPrevious)
	assert.True(t, tr.Trajectory[1].ExtendsPrevious, "the mock re-tokenizes the history as it produced it")
	assert.True(t, tr.Interleavable)
	assert.Empty(t, tr.PrefixBreaks)
	assert.False(t, tr.Stale, "one version behind, max_off_policy_steps 1")

	assert.Equal(t, "interleaved", tr.View)
	require.Len(t, tr.Samples, 1, "one sample for the whole rollout")
	s := tr.Samples[0]
	assert.Equal(t, []int{0, 1}, s.Steps)
	assert.Equal(t, tr.Trajectory[0].Tokens.PromptIDs, s.PromptIDs)
	env := mock.TokenIDs("5") // the tool's result, between the two completions
	wantIDs := append(append(append([]int32{}, tr.Trajectory[0].Tokens.CompletionIDs...), env...), tr.Trajectory[1].Tokens.CompletionIDs...)
	assert.Equal(t, wantIDs, s.CompletionIDs)
	wantMask := append(append(ones(len(tr.Trajectory[0].Tokens.CompletionIDs)), make([]int, len(env))...), ones(len(tr.Trajectory[1].Tokens.CompletionIDs))...)
	assert.Equal(t, wantMask, s.CompletionMask, "the environment's tokens are masked out")

	status, body = gatewayCall(t, http.MethodGet, root+"/trajectory?policy_version=5&view=steps", gatewayToken, "")
	require.Equal(t, http.StatusOK, status, string(body))
	require.NoError(t, json.Unmarshal(body, &tr))
	assert.True(t, tr.Stale, "two versions behind")
	assert.Len(t, tr.Samples, 2, "a sample per step")
	status, body = gatewayCall(t, http.MethodGet, root+"/trajectory?view=tokens", gatewayToken, "")
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, string(body), `want \"interleaved\" or \"steps\"`)
}

// checkSeedAnthropic calls the seed rollout with the Anthropic SDK, whose
// base URL is the same, with the gateway token as its x-api-key, and with
// another key.
func checkSeedAnthropic(t *testing.T, root string) {
	t.Helper()
	ctx := context.Background()
	ac := anthropic.NewClient(aoption.WithBaseURL(root), aoption.WithAPIKey(gatewayToken), aoption.WithMaxRetries(0))
	msg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "anything", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is 4 + 4?"))}})
	require.NoError(t, err)
	require.NotEmpty(t, msg.Content)
	assert.Contains(t, msg.Content[0].Text, "8")
	wrongA := anthropic.NewClient(aoption.WithBaseURL(root), aoption.WithAPIKey("not-a-key-of-ours"), aoption.WithMaxRetries(0))
	_, err = wrongA.Messages.New(ctx, anthropic.MessageNewParams{Model: "anything", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is 4 + 4?"))}})
	var aErr *anthropic.Error
	require.ErrorAs(t, err, &aErr)
	assert.Equal(t, http.StatusUnauthorized, aErr.StatusCode)
	assert.Contains(t, aErr.RawJSON(), `"type":"error"`, "in Anthropic's shape")
}

func ones(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = 1
	}
	return out
}
