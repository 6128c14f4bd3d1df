package workflows

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Validate names what it refuses by the field's JSON name, the name a
// run's input and its stored config carry, whichever front end wrote it.
func TestValidateNamesTheField(t *testing.T) {
	valid := RunConfig{RunID: "r", Taskset: "sample", Model: "mock"}.WithDefaults()
	require.NoError(t, valid.Validate())
	zero := 0
	for _, tc := range []struct {
		set  func(*RunConfig)
		want string
	}{
		{func(c *RunConfig) { c.RunID = "" }, "run_id is empty"},
		{func(c *RunConfig) { c.Model = "" }, "model is empty"},
		{func(c *RunConfig) { c.Tasks = -3 }, "tasks -3 is negative"},
		{func(c *RunConfig) { c.RolloutsPerTask = 0 }, "rollouts_per_task 0: must be at least 1"},
		{func(c *RunConfig) { c.MaxConcurrent = -2 }, "max_concurrent -2 is negative"},
		{func(c *RunConfig) { c.MaxFailures = -0.5 }, "max_failures -0.5 is negative"},
		{func(c *RunConfig) { c.MaxRunCostUSD = -1 }, "max_run_cost_usd -1 is negative: give USD per run"},
		{func(c *RunConfig) { c.Sampling.MaxTokens = &zero }, "sampling.max_tokens 0: must be at least 1"},
		{func(c *RunConfig) { c.Harness.Dialect = "gemini" }, `harness.dialect "gemini": want chat, responses or anthropic`},
		{func(c *RunConfig) { c.Harness.PolicyVersionHeader = "x policy" }, `harness.policy_version_header "x policy" is not an HTTP header name`},
		{func(c *RunConfig) { c.Harness.Timeout = 0 }, "harness.timeout 0s: must be positive"},
		{func(c *RunConfig) { c.Harness.VerifierTimeout = -time.Second }, "harness.verifier_timeout -1s is negative"},
		{func(c *RunConfig) { c.Harness.MaxTurns = 0 }, "harness.max_turns 0: must be at least 1"},
		{func(c *RunConfig) { c.Harness.MaxTokensTotal = -1 }, "harness.max_tokens_total -1 is negative"},
		{func(c *RunConfig) { c.Harness.MaxModelTime = -time.Second }, "harness.max_model_time -1s is negative"},
		{func(c *RunConfig) { c.Harness.MaxCostUSD = -0.25 }, "harness.max_cost_usd -0.25 is negative: give USD per rollout"},
		{func(c *RunConfig) { c.Harness.TopLogprobs = -1 }, "harness.top_logprobs -1 is negative"},
		{func(c *RunConfig) { c.Limits.HeartbeatTimeout = 500 * time.Millisecond }, "limits.heartbeat_timeout 500ms: want at least 1s"},
		{func(c *RunConfig) { c.Limits.MaxAttempts = 0 }, "limits.max_attempts 0: must be at least 1"},
		{func(c *RunConfig) { c.Limits.ContinueAsNewAfter = 0 }, "limits.continue_as_new_after 0: must be at least 1"},
	} {
		cfg := valid
		tc.set(&cfg)
		err := cfg.Validate()
		require.ErrorContains(t, err, tc.want)
		var fe *FieldError
		require.ErrorAs(t, err, &fe)
		assert.True(t, hasJSONField(t, cfg, fe.Field), "Validate() = %v: %s is no JSON field of RunConfig", err, fe.Field)
	}
}

// hasJSONField reports whether v's JSON has the dotted field path.
func hasJSONField(t *testing.T, v any, path string) bool {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var doc any
	require.NoError(t, json.Unmarshal(b, &doc))
	for name := range strings.SplitSeq(path, ".") {
		obj, ok := doc.(map[string]any)
		if !ok {
			return false
		}
		if doc, ok = obj[name]; !ok {
			return false
		}
	}
	return true
}

func TestTrainConfigValidate(t *testing.T) {
	require.NoError(t, TrainConfig{Epochs: 0, MaxFailures: 0.5}.Validate(), "0 epochs runs until stopped")
	assert.EqualError(t, TrainConfig{Epochs: -1}.Validate(), "epochs -1 is negative")
	assert.EqualError(t, TrainConfig{MaxFailures: -2}.Validate(), "max_failures -2 is negative")
}
