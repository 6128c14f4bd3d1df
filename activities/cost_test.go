package activities_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/activities"
	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/prices"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
)

// The test's prices: the agent's model and the judge's, at different
// prices so that a call priced at the wrong one shows.
var (
	agentPrice = prices.Price{Input: 1, Output: 4}
	judgePrice = prices.Price{Input: 3, Output: 15}
)

// namedMock is the offline mock model answering as model, behind the
// providers client of a dialect.
func namedMock(t *testing.T, dialect, model string) *providers.Client {
	t.Helper()
	m, err := mock.New(mock.Config{Model: model})
	require.NoError(t, err)
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	c, err := providers.New(dialect, srv.URL+"/v1", "")
	require.NoError(t, err)
	return c
}

// stored is a rollout's record and trace as the run store keeps them.
func (r *rig) stored(t *testing.T, key string) (results.Record, *trace.Rollout) {
	t.Helper()
	ctx := context.Background()
	rec, ok, err := r.store.Get(ctx, "run", key)
	require.NoError(t, err)
	require.True(t, ok, "the rollout is stored")
	tr, err := r.store.Trace(ctx, "run", key)
	require.NoError(t, err)
	return rec, tr
}

// A rollout judged on its judge role's model has the judge's call priced
// at that model's price, and the rollout's cost (record and summary) is
// its harness turns' and its judge turns'.
func TestJudgeCallsArePricedIntoTheRolloutsCost(t *testing.T) {
	def := mockProvider(t, dialects.NameChat)
	judgeHost := namedMock(t, dialects.NameAnthropic, "judge-model")
	r := newRigWith(t, def, answering(""))
	r.acts.Prices = prices.Table{"mock": agentPrice, "judge-model": judgePrice}
	r.acts.Providers = map[string]activities.Provider{rollout.DefaultProvider: def, "claude": judgeHost}
	in := ref(1)
	in.Rubric = "judge"
	require.NoError(t, in.Harness.Roles.Set("judge=claude:judge-model"))
	s, err := r.rollout(t, in)
	require.NoError(t, err)
	require.Equal(t, rollout.StatusOK, s.Status)

	rec, tr := r.stored(t, in.Key())
	require.Len(t, tr.Turns, 1)
	require.NotNil(t, tr.Turns[0].CostUSD, "the agent's turn is priced by the interception")
	require.Len(t, tr.Judge, 1)
	jt := tr.Judge[0]
	require.Positive(t, jt.Response.Usage.InputTokens+jt.Response.Usage.OutputTokens, "the mock reports usage")
	require.NotNil(t, jt.CostUSD, "the judge's call is priced")
	assert.InDelta(t, judgePrice.Cost(jt.Response.Usage), *jt.CostUSD, 1e-15, "at the judge's model's price")
	assert.False(t, jt.Unpriced())

	want := *tr.Turns[0].CostUSD + *jt.CostUSD
	assert.InDelta(t, want, rec.CostUSD, 1e-12, "the record's cost is the harness's and the judge's")
	assert.Zero(t, rec.UnpricedTurns)
	assert.InDelta(t, want, s.CostUSD, 1e-12, "so is the summary's the workflow sums")
	assert.Zero(t, s.UnpricedTurns)
}

// A judge model without a price leaves the judge's call unpriced: the
// rollout's cost is the agent's alone and it counts the judge's call as a
// turn of unknown cost, never as 0.
func TestJudgeCallOfAnUnpricedModelIsCountedUnpriced(t *testing.T) {
	def := mockProvider(t, dialects.NameChat)
	judgeHost := namedMock(t, dialects.NameChat, "unpriced-judge")
	r := newRigWith(t, def, answering(""))
	r.acts.Prices = prices.Table{"mock": agentPrice}
	r.acts.Providers = map[string]activities.Provider{rollout.DefaultProvider: def, "other": judgeHost}
	in := ref(1)
	in.Rubric = "judge"
	require.NoError(t, in.Harness.Roles.Set("judge=other:unpriced-judge"))
	s, err := r.rollout(t, in)
	require.NoError(t, err)
	require.Equal(t, rollout.StatusOK, s.Status)

	rec, tr := r.stored(t, in.Key())
	require.Len(t, tr.Turns, 1)
	require.NotNil(t, tr.Turns[0].CostUSD)
	require.Len(t, tr.Judge, 1)
	assert.Nil(t, tr.Judge[0].CostUSD)
	assert.True(t, tr.Judge[0].Unpriced(), "its cost is unknown, not 0")
	assert.InDelta(t, *tr.Turns[0].CostUSD, rec.CostUSD, 1e-12)
	assert.Equal(t, 1, rec.UnpricedTurns, "the judge's call is counted unpriced")
	assert.Equal(t, 1, s.UnpricedTurns)
}

// A judge whose first provider is down and whose second answers: the
// judge turn is priced once, at the price of the model that answered.
func TestJudgeFallbackPricedAtTheModelThatAnswered(t *testing.T) {
	def := mockProvider(t, dialects.NameChat)
	down := downProvider(t)
	r := newRigWith(t, def, answering(""))
	r.acts.Prices = prices.Table{"mock": agentPrice}
	r.acts.Providers = map[string]activities.Provider{rollout.DefaultProvider: def, "down": down}
	in := ref(1)
	in.Rubric = "judge"
	require.NoError(t, in.Harness.Roles.Set("judge=down,default"))
	_, err := r.rollout(t, in)
	require.NoError(t, err)
	rec, tr := r.stored(t, in.Key())
	require.Len(t, tr.Judge, 1)
	jt := tr.Judge[0]
	assert.Equal(t, []string{"down"}, jt.FallbackFrom)
	require.NotNil(t, jt.CostUSD)
	assert.InDelta(t, agentPrice.Cost(jt.Response.Usage), *jt.CostUSD, 1e-15)
	assert.InDelta(t, *tr.Turns[0].CostUSD+*jt.CostUSD, rec.CostUSD, 1e-12)
}

// A task's verifier combined with a judge (tests*0.8+judge*0.2): Verify
// stores the rollout with the judge's calls in its cost.
func TestVerifiedRolloutCountsItsJudgeCalls(t *testing.T) {
	r, _ := verifiedRig(t)
	r.acts.Judge = namedMock(t, dialects.NameChat, "judge-model")
	r.acts.Prices = prices.Table{"judge-model": judgePrice}
	ref := harborRef(t, "release-bundle")
	ref.Rubric = "tests*0.8+judge*0.2"
	s := r.runForVerify(t, ref, time.Minute)
	require.NotNil(t, s.Verify)
	val, err := r.env.ExecuteActivity(r.acts.Verify, rollout.VerifyInput{Rollout: ref})
	require.NoError(t, err)
	var done rollout.Summary
	require.NoError(t, val.Get(&done))
	require.Equal(t, rollout.StatusOK, done.Status)

	rec, tr := r.stored(t, ref.Key())
	assert.Empty(t, tr.Turns, "the oracle makes no model call")
	require.Len(t, tr.Judge, 1)
	require.NotNil(t, tr.Judge[0].CostUSD)
	assert.InDelta(t, judgePrice.Cost(tr.Judge[0].Response.Usage), *tr.Judge[0].CostUSD, 1e-15)
	assert.InDelta(t, *tr.Judge[0].CostUSD, rec.CostUSD, 1e-12, "the rollout's cost is its judge's")
	assert.InDelta(t, rec.CostUSD, done.CostUSD, 1e-12)
}

// askUser posts the conversation to the rollout's persona user, as a
// harness does, and returns the status.
func askUser(ctx context.Context, spec harness.Spec) (int, error) {
	body := `{"messages":[{"role":"user","content":"` + spec.Task.Prompt + `"},{"role":"assistant","content":"4"}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, spec.BaseURL+"/user", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+spec.Secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// A task with a persona user: the persona's call is priced on its user
// turn and counted in the rollout's cost; a rollout whose --max-cost the
// persona alone has passed is not ended by it: the agent's first call is
// answered, and only the agent's own spend ends the rollout.
func TestPersonaCallsArePricedIntoTheRolloutsCost(t *testing.T) {
	dir := t.TempDir()
	tasks := filepath.Join(dir, "tasks.jsonl")
	require.NoError(t, os.WriteFile(tasks, []byte(`{"id":"talk","prompt":"What is 2+2?","answer":"4","user":{"persona":"You are a student. {{prompt}}","max_turns":2}}`+"\n"), 0o644))
	var calls []int
	h := fakeRuntime(func(ctx context.Context, spec harness.Spec) (harness.Result, error) {
		for _, step := range []func(context.Context, harness.Spec) (int, error){askUser, askUser, callModel, callModel} {
			status, err := step(ctx, spec)
			if err != nil {
				return harness.Result{}, err
			}
			calls = append(calls, status)
		}
		return harness.Result{Answer: "4"}, nil
	})
	def := mockProvider(t, dialects.NameChat)
	r := newRigWith(t, def, h)
	r.acts.Prices = prices.Table{"mock": agentPrice}
	in := rollout.Ref{
		RunID: "run", Taskset: tasks, Model: "mock", Rubric: "exact", Attempt: 1,
		Harness: rollout.HarnessConfig{Command: []string{"fake-harness"}, Timeout: time.Minute, MaxCostUSD: 1e-9},
	}
	s, err := r.rollout(t, in)
	require.NoError(t, err)
	assert.Equal(t, []int{200, 200, 200, 400}, calls, "the user's two calls and the agent's first are answered, the agent's second is refused by its own spend")
	assert.Equal(t, rollout.StatusError, s.Status)
	assert.Equal(t, "limit:cost", s.ErrorKind, "the agent's own spend ended it")

	rec, tr := r.stored(t, in.Key())
	require.Len(t, tr.Turns, 2)
	require.Len(t, tr.Users, 2)
	require.NotNil(t, tr.Turns[0].CostUSD)
	assert.Nil(t, tr.Turns[1].CostUSD, "the refused call costs nothing")
	want := *tr.Turns[0].CostUSD
	for _, u := range tr.Users {
		require.NotNil(t, u.Call)
		require.NotNil(t, u.Call.CostUSD, "the persona's call is priced")
		assert.InDelta(t, agentPrice.Cost(u.Call.Response.Usage), *u.Call.CostUSD, 1e-15)
		assert.Greater(t, *u.Call.CostUSD, 1e-9)
		want += *u.Call.CostUSD
	}
	assert.InDelta(t, want, rec.CostUSD, 1e-12, "the rollout's cost is the agent's and the user's")
	assert.Zero(t, rec.UnpricedTurns)
}
