package activities_test

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/activities"
	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/rollout"
)

// The judge role on a second provider: the judge's call goes there, in
// that provider's own dialect and with the role's model, the agent's turns
// stay on the default provider, and the trace's judge turn names it.
func TestRunJudgesOnTheJudgeRolesProvider(t *testing.T) {
	def := mockProvider(t, dialects.NameChat)
	judgeHost := mockProvider(t, dialects.NameAnthropic)
	r := newRigWith(t, def, answering(""))
	r.acts.Judge = def
	r.acts.Providers = map[string]activities.Provider{rollout.DefaultProvider: def, "claude": judgeHost}
	in := ref(1)
	in.Rubric = "judge"
	require.NoError(t, in.Harness.Roles.Set("judge=claude:judge-model"))
	s, err := r.rollout(t, in)
	require.NoError(t, err)
	assert.Equal(t, rollout.StatusOK, s.Status)
	assert.Equal(t, 1.0, s.Reward)

	tr, err := r.store.Trace(context.Background(), "run", in.Key())
	require.NoError(t, err)
	require.Len(t, tr.Turns, 1)
	assert.Equal(t, dialects.NameChat, tr.Turns[0].Dialect, "the agent's call went to the default provider")
	assert.Empty(t, tr.Turns[0].Provider, "a role not set names no provider")
	require.Len(t, tr.Judge, 1)
	turn := tr.Judge[0]
	assert.Equal(t, "claude", turn.Provider)
	assert.Empty(t, turn.FallbackFrom)
	assert.Equal(t, dialects.NameAnthropic, turn.Dialect, "the judge asked in its provider's dialect")
	assert.Equal(t, "judge-model", turn.Request.Model)
	assert.Equal(t, 200, turn.Status)
}

// A judge whose first provider is down falls back to the next, and the
// judge turn records it.
func TestRunJudgeFallsBack(t *testing.T) {
	def := mockProvider(t, dialects.NameChat)
	down := downProvider(t)
	r := newRigWith(t, def, answering(""))
	r.acts.Providers = map[string]activities.Provider{rollout.DefaultProvider: def, "down": down}
	in := ref(1)
	in.Rubric = "judge"
	require.NoError(t, in.Harness.Roles.Set("judge=down,default"))
	s, err := r.rollout(t, in)
	require.NoError(t, err)
	assert.Equal(t, 1.0, s.Reward)
	tr, err := r.store.Trace(context.Background(), "run", in.Key())
	require.NoError(t, err)
	require.Len(t, tr.Judge, 1)
	assert.Equal(t, rollout.DefaultProvider, tr.Judge[0].Provider)
	assert.Equal(t, []string{"down"}, tr.Judge[0].FallbackFrom)
}

// The policy role falls back through Acquire's registration: the agent's
// turn is answered by the fallback and names the provider it fell back
// from; the rollout is the agent's success.
func TestRunPolicyFallsBack(t *testing.T) {
	def := mockProvider(t, dialects.NameChat)
	down := downProvider(t)
	r := newRigWith(t, def, answering(""))
	r.acts.Providers = map[string]activities.Provider{rollout.DefaultProvider: def, "down": down}
	in := ref(1)
	require.NoError(t, in.Harness.Roles.Set("policy=down,default"))
	s, err := r.rollout(t, in)
	require.NoError(t, err)
	assert.Equal(t, rollout.StatusOK, s.Status)
	tr, err := r.store.Trace(context.Background(), "run", in.Key())
	require.NoError(t, err)
	require.Len(t, tr.Turns, 1)
	assert.Equal(t, 200, tr.Turns[0].Status)
	assert.Equal(t, rollout.DefaultProvider, tr.Turns[0].Provider)
	assert.Equal(t, []string{"down"}, tr.Turns[0].FallbackFrom)
}

// A role naming a provider the worker lacks refuses the rollout as a
// configuration error that says how to configure it, before any harness
// runs: nothing is scored as the agent's.
func TestAcquireRefusesAProviderTheWorkerLacks(t *testing.T) {
	for _, role := range []string{"policy=elsewhere", "user=elsewhere:persona", "judge=default,elsewhere"} {
		r := newRig(t, answering(""))
		r.acts.Providers = map[string]activities.Provider{rollout.DefaultProvider: r.up}
		in := ref(1)
		require.NoError(t, in.Harness.Roles.Set(role))
		_, err := r.env.ExecuteActivity(r.acts.Acquire, rollout.AcquireInput{Rollout: in})
		require.Error(t, err, role)
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr, role)
		assert.Equal(t, rollout.ErrTypeConfig, appErr.Type(), role)
		assert.True(t, appErr.NonRetryable(), role)
		assert.Contains(t, err.Error(), `this worker has no provider "elsewhere" (it has default): start it with --provider elsewhere=URL and the key in EVALFLOW_PROVIDER_ELSEWHERE_API_KEY`, role)
		_, ok, err := r.store.Get(context.Background(), "run", in.Key())
		require.NoError(t, err)
		assert.False(t, ok, "%s: nothing recorded", role)
	}
}

// downProvider is a provider at a loopback port nothing listens on: every
// call to it fails to connect, an infrastructure failure.
func downProvider(t *testing.T) *providers.OpenAI {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, ln.Close())
	return providers.NewOpenAI("http://"+ln.Addr().String()+"/v1", "")
}
