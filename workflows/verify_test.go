package workflows

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/rollout"
)

// TestVerifyRunsAfterRunOnTheSameWorker: a rollout whose Run leaves it for
// its verifier ends with Verify's summary, run on the queue of the worker
// that holds the workspace; Run is told how soon Verify starts.
func TestVerifyRunsAfterRunOnTheSameWorker(t *testing.T) {
	env := newEnv()
	h := newHoldingWorker(env)
	h.baseURL = "http://127.0.0.1:9"
	h.verified = true
	h.verify = func(_ context.Context, in rollout.VerifyInput) (rollout.Summary, error) {
		return rollout.Summary{Key: in.Rollout.Key(), Index: in.Rollout.Index, Status: rollout.StatusOK, Reward: 0.5}, nil
	}
	res := runHeldEval(t, env, 4)

	assert.Equal(t, int64(4), res.OK)
	assert.InDelta(t, 0.5, res.MeanReward, 1e-9, "the reward is the verifier's")
	assert.Equal(t, 4, h.runs["host-1"])
	assert.Equal(t, map[string]int{"host-1": 4}, h.verifies, "every Verify on the worker that ran the agent")
	for _, d := range h.verifyWithin {
		assert.Equal(t, DefaultHostStartTimeout, d, "Run is told how soon Verify starts")
	}
}

// TestVerifierErrorsAreRetriedThenRecordedAsVerifier: a verifier that
// keeps failing is retried with the rollout, and recorded as the
// verifier's error, never as a reward of 0 for the agent.
func TestVerifierErrorsAreRetriedThenRecordedAsVerifier(t *testing.T) {
	env := newEnv()
	h := newHoldingWorker(env)
	h.baseURL = "http://127.0.0.1:9"
	h.verified = true
	h.verify = func(context.Context, rollout.VerifyInput) (rollout.Summary, error) {
		return rollout.Summary{}, temporal.NewApplicationError(`task t: the verifier reward.txt: "abc" is not a number`, rollout.ErrTypeVerifier)
	}
	cfg := testConfig(1, 1, 1)
	cfg.Limits.MaxAttempts = 3
	res := runEval(t, env, cfg)

	assert.Equal(t, int64(1), res.Failed)
	require.Len(t, res.Errors, 1)
	assert.Equal(t, rollout.KindVerifier, res.Errors[0].Kind)
	require.Len(t, res.FailedSamples, 1)
	assert.Contains(t, res.FailedSamples[0].Error, `reward.txt: "abc" is not a number`)
	assert.Equal(t, 3, h.runs["host-1"], "each attempt runs the agent again in a fresh workspace")
	assert.Equal(t, 3, h.verifies["host-1"], "and verifies it again")
}

// TestWorkerDeadBeforeVerifyRunsTheRolloutAgain: the worker that ran the
// agent dies before its Verify starts (the workspace is gone with it): the
// attempt fails as infrastructure and the rollout runs again elsewhere.
func TestWorkerDeadBeforeVerifyRunsTheRolloutAgain(t *testing.T) {
	env := newEnv()
	h := newHoldingWorker(env)
	h.baseURL = "http://127.0.0.1:9"
	h.verified = true
	h.host = func(int32) string { return "host-1" }
	first := true
	h.verify = func(ctx context.Context, in rollout.VerifyInput) (rollout.Summary, error) {
		if first {
			first = false
			return rollout.Summary{}, temporal.NewTimeoutError(0, nil) // its schedule-to-start timeout
		}
		return rollout.Summary{Key: in.Rollout.Key(), Index: in.Rollout.Index, Status: rollout.StatusOK, Reward: 1}, nil
	}
	cfg := testConfig(1, 1, 1)
	res := runEval(t, env, cfg)

	assert.Equal(t, int64(1), res.OK, "%+v", res.FailedSamples)
	assert.Equal(t, 2, h.runs["host-1"], "the agent ran again")
	assert.Equal(t, 2, h.verifies["host-1"])
	for _, n := range h.acquires {
		assert.Equal(t, 2, n, "the rollout was acquired again")
	}
}
