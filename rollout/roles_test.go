package rollout_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/rollout"
)

func TestRolesSet(t *testing.T) {
	var r rollout.Roles
	require.NoError(t, r.Set("judge=claude:claude-sonnet-4-5,backup"))
	require.NoError(t, r.Set("user=local:llama3:8b"))
	require.NoError(t, r.Set("policy=vllm-a,vllm-b"))
	assert.Equal(t, rollout.Roles{
		Policy: rollout.Route{{Provider: "vllm-a"}, {Provider: "vllm-b"}},
		Judge:  rollout.Route{{Provider: "claude", Model: "claude-sonnet-4-5"}, {Provider: "backup"}},
		User:   rollout.Route{{Provider: "local", Model: "llama3:8b"}},
	}, r)
	assert.Equal(t, []string{"vllm-a", "vllm-b", "claude", "backup", "local"}, r.Providers())
	b, err := json.Marshal(rollout.HarnessConfig{Roles: rollout.Roles{Judge: rollout.Route{{Provider: "claude"}}}})
	require.NoError(t, err)
	assert.Contains(t, string(b), `"roles":{"judge":[{"provider":"claude"}]}`)
}

// A run without roles keeps the harness config it had: the field is
// absent, so the workflow inputs of earlier runs are unchanged.
func TestRolesAbsentWhenEmpty(t *testing.T) {
	b, err := json.Marshal(rollout.HarnessConfig{})
	require.NoError(t, err)
	assert.NotContains(t, string(b), "roles")
	assert.True(t, rollout.Roles{}.Empty())
}

func TestRolesSetRefuses(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"judge", "want ROLE=PROVIDER[:MODEL][,FALLBACK[:MODEL]…]"},
		{"judge=", "want ROLE=PROVIDER[:MODEL][,FALLBACK[:MODEL]…]"},
		{"critic=a", `role "critic": unknown role (want policy, judge or user)`},
		{"judge=a,,b", "role judge: empty provider name"},
		{"judge=a b", `provider name "a b": letters, digits, '-' and '_' only`},
		{"policy=a:gpt-4o", "the policy's model is the run's --model"},
	} {
		var r rollout.Roles
		err := r.Set(tt.in)
		require.Error(t, err, "Set(%q)", tt.in)
		assert.Contains(t, err.Error(), tt.want, "Set(%q)", tt.in)
	}
}

func TestProviderKeyEnv(t *testing.T) {
	assert.Equal(t, "EVALFLOW_PROVIDER_JUDGE_HOST_API_KEY", rollout.ProviderKeyEnv("judge-host"))
	assert.Equal(t, "EVALFLOW_PROVIDER_CLAUDE_API_KEY", rollout.ProviderKeyEnv("claude"))
}
