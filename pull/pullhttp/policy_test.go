package pullhttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/pull"
	"github.com/evalflow/evalflow/pull/pullhttp"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

// gatedModel is the offline mock as a trainer's inference server: it
// names its policy version in x-policy-version once told one, and while
// closed it holds every call until opened, telling the test of each.
type gatedModel struct {
	*mock.Model
	closed  atomic.Bool
	arrived chan struct{}
	open    chan struct{}
}

func newGatedModel(t *testing.T) (*gatedModel, string) {
	t.Helper()
	m, err := mock.New(mock.Config{PolicyVersionHeader: "x-policy-version"})
	require.NoError(t, err)
	g := &gatedModel{Model: m, arrived: make(chan struct{}, 64), open: make(chan struct{})}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return g, srv.URL + "/v1"
}

func (g *gatedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.closed.Load() && r.URL.Path == "/v1/chat/completions" {
		g.arrived <- struct{}{}
		select {
		case <-g.open:
		case <-r.Context().Done():
			return
		}
	}
	g.Model.ServeHTTP(w, r)
}

// TestPullAPIPolicyVersions drives policy versions and the staleness bound
// through the HTTP API: a version announced while a group's calls wait
// makes its rollouts stale, and they run again on the new version under
// new keys; rollouts whose upstream answers on an old version come back
// marked when asked; versions only go forward.
func TestPullAPIPolicyVersions(t *testing.T) {
	model, baseURL := newGatedModel(t)
	cl := newClusterOn(t, baseURL)
	cfg := workflows.RunConfig{
		RunID: "policy-run", Taskset: "sample", Tasks: 6, RolloutsPerTask: 2, MaxConcurrent: 8, Seed: 7, Model: "mock",
		Harness: rollout.HarnessConfig{PolicyVersionHeader: "x-policy-version"},
	}
	_, err := pull.Start(context.Background(), cl.c, queue, cfg, workflows.TrainConfig{})
	require.NoError(t, err)
	base := cl.serve(t, pullhttp.Config{}).URL + "/v1/pull/policy-run/"

	a := call(t, "POST", base+"policy", `{"version": 1}`)
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	require.JSONEq(t, `{"run_id": "policy-run", "version": 1}`, string(a.body))
	for range 3 {
		require.Equal(t, http.StatusOK, call(t, "POST", base+"sample", "").status)
	}
	staleGroupRunsAgain(t, model, base)
	oldVersionsAreMarked(t, model, base)
	versionsOnlyGoForward(t, base)

	a = call(t, "GET", base+"progress", "")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var pr workflows.PullProgress
	a.decode(t, &pr)
	require.Equal(t, int64(4), *pr.PolicyVersion, "progress reports the current version")
	require.Equal(t, int64(3), pr.Groups)
}

// staleGroupRunsAgain: version 2 is announced while the group's rollouts,
// started on 1, wait on the model: once done they are stale, and run again.
func staleGroupRunsAgain(t *testing.T, model *gatedModel, base string) {
	t.Helper()
	model.closed.Store(true)
	answered := make(chan answer, 1)
	go func() {
		a, err := do(t, context.Background(), "POST", base+"run_group", "Bearer "+token, `{"position": 0, "n": 2, "max_off_policy_steps": 0}`)
		if err != nil {
			a.status = -1
		}
		answered <- a
	}()
	for range 2 {
		select {
		case <-model.arrived:
		case <-time.After(2 * time.Minute):
			t.Fatal("the group's rollouts never called the model")
		}
	}
	a := call(t, "POST", base+"policy", `{"version": 2}`)
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	model.closed.Store(false)
	close(model.open)
	a = <-answered
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var group workflows.GroupResult
	a.decode(t, &group)
	require.Len(t, group.Rollouts, 2)
	for k, s := range group.Rollouts {
		require.Equal(t, rollout.StatusOK, s.Status, "%+v", s)
		require.Equal(t, rollout.Key("policy-run", group.Ref.Epoch, group.Ref.Index, workflows.RerunK(k, 1)), s.Key, "rerun under a key of its own")
		require.Equal(t, 1, s.StaleReruns)
		require.NotNil(t, s.PolicyVersion)
		require.Equal(t, int64(2), *s.PolicyVersion, "run again on the announced version")
		require.Zero(t, s.OffPolicySteps)
		require.False(t, s.Stale)
	}
	require.Contains(t, string(a.body), `"policy_version":2`)
}

// oldVersionsAreMarked: the inference server still serves version 1 while
// the trainer is at 4: its header wins, and the rollouts come back marked.
func oldVersionsAreMarked(t *testing.T, model *gatedModel, base string) {
	t.Helper()
	model.SetPolicyVersion(1)
	require.Equal(t, http.StatusOK, call(t, "POST", base+"policy", `{"version": 4}`).status)
	a := call(t, "POST", base+"run_group", `{"position": 1, "n": 2, "max_off_policy_steps": 1, "on_stale": "mark"}`)
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var marked workflows.GroupResult
	a.decode(t, &marked)
	require.Len(t, marked.Rollouts, 2)
	for k, s := range marked.Rollouts {
		require.Equal(t, rollout.Key("policy-run", marked.Ref.Epoch, marked.Ref.Index, k), s.Key)
		require.Equal(t, int64(1), *s.PolicyVersion, "the upstream's header names the version that answered")
		require.Equal(t, int64(3), s.OffPolicySteps)
		require.True(t, s.Stale)
		require.Zero(t, s.StaleReruns)
	}
	require.Contains(t, string(a.body), `"stale":true`)
	require.Contains(t, string(a.body), `"off_policy_steps":3`)

	// run_rollout takes the bound too; within it, nothing is marked.
	model.SetPolicyVersion(4)
	a = call(t, "POST", base+"run_rollout", `{"position": 2, "max_off_policy_steps": 0}`)
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var one pull.Rollout
	a.decode(t, &one)
	require.Equal(t, int64(4), *one.Rollout.PolicyVersion)
	require.False(t, one.Rollout.Stale)
}

// versionsOnlyGoForward: a version behind the run's is refused, and bad
// bodies name their field.
func versionsOnlyGoForward(t *testing.T, base string) {
	t.Helper()
	a := call(t, "POST", base+"policy", `{"version": 3}`)
	require.Equal(t, http.StatusConflict, a.status, "%s", a.body)
	kind, msg := a.apiError(t)
	require.Equal(t, "version_behind", kind)
	require.Contains(t, msg, "policy version 3 is behind the run's current version 4")
	a = call(t, "POST", base+"policy", `{"version": 4}`)
	require.Equal(t, http.StatusOK, a.status, "announcing the current version again is fine: %s", a.body)
	for _, b := range []struct{ action, body, names string }{
		{"policy", `{}`, "field version is required"},
		{"policy", `{"version": -1}`, "field version = -1 is negative"},
		{"policy", `{"version": "2"}`, "field version must be an integer"},
		{"policy", `{"v": 2}`, `unknown field "v"`},
		{"run_group", `{"position": 0, "n": 2, "max_off_policy_steps": -1}`, "field max_off_policy_steps = -1 is negative"},
		{"run_group", `{"position": 0, "n": 2, "on_stale": "drop"}`, `field on_stale = "drop"`},
		{"run_rollout", `{"position": 0, "on_stale": "drop"}`, `field on_stale = "drop"`},
	} {
		a := call(t, "POST", base+b.action, b.body)
		require.Equal(t, http.StatusBadRequest, a.status, "%s %s: %s", b.action, b.body, a.body)
		kind, msg := a.apiError(t)
		require.Equal(t, "bad_request", kind)
		require.Contains(t, msg, b.names, "%s %s", b.action, b.body)
	}
	a = call(t, "GET", base+"policy", "")
	require.Equal(t, http.StatusMethodNotAllowed, a.status, "%s", a.body)
}

// The Go client announces versions and passes the bound as options.
func TestClientSetsPolicyVersionsAndBounds(t *testing.T) {
	model, baseURL := newGatedModel(t)
	cl := newClusterOn(t, baseURL)
	cfg := workflows.RunConfig{
		RunID: "policy-go", Taskset: "sample", Tasks: 4, RolloutsPerTask: 2, MaxConcurrent: 8, Seed: 7, Model: "mock",
		Harness: rollout.HarnessConfig{PolicyVersionHeader: "x-policy-version"},
	}
	ctx := context.Background()
	p, err := pull.Start(ctx, cl.c, queue, cfg, workflows.TrainConfig{})
	require.NoError(t, err)

	v, err := p.SetPolicyVersion(ctx, 5)
	require.NoError(t, err)
	require.Equal(t, int64(5), v)
	_, err = p.SetPolicyVersion(ctx, 4)
	require.ErrorContains(t, err, "versions only go forward")

	model.SetPolicyVersion(3) // the inference server lags two versions
	ref, err := p.Sample(ctx)
	require.NoError(t, err)
	g, err := p.RunGroup(ctx, ref, 2, pull.MaxOffPolicySteps(1), pull.OnStale(workflows.OnStaleMark))
	require.NoError(t, err)
	for _, s := range g.Rollouts {
		require.Equal(t, int64(3), *s.PolicyVersion)
		require.Equal(t, int64(2), s.OffPolicySteps)
		require.True(t, s.Stale)
	}
	g, err = p.RunGroup(ctx, ref, 2, pull.MaxOffPolicySteps(2))
	require.NoError(t, err)
	for _, s := range g.Rollouts {
		require.False(t, s.Stale, "within a bound of 2")
		require.True(t, s.Reused, "the stored rollouts are collected again")
	}

	_, err = p.RunGroup(ctx, ref, 2, pull.OnStale("drop"))
	require.ErrorContains(t, err, `on_stale "drop"`)
	pr, err := p.Progress(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(5), *pr.PolicyVersion)
}
