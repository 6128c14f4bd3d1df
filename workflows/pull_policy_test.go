package workflows

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/evalflow/evalflow/rollout"
)

// policyWorker fakes a worker whose rollouts each take a minute of the
// workflow's clock and report the policy version their turns recorded:
// the one they were started on, or answered (upstream) when set.
type policyWorker struct {
	mu sync.Mutex
	// refs are the rollouts run, in the order they started.
	refs []rollout.Ref
	// upstream, when set, is the version every turn reports, whatever the
	// rollout was started on (an upstream's header).
	upstream *int64
}

func (w *policyWorker) register(env *testsuite.TestWorkflowEnvironment) {
	env.OnActivity(a.DescribeTaskset, mock.Anything, mock.Anything).Return(rollout.DescribeTasksetResult{Len: 8}, nil)
	env.OnActivity(a.Acquire, mock.Anything, mock.Anything).Return(rollout.AcquireResult{HostQueue: "host-1"}, nil)
	env.OnActivity(a.Expose, mock.Anything, mock.Anything).Return(rollout.ExposeResult{BaseURL: "http://127.0.0.1:1"}, nil)
	env.OnActivity(a.Release, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(a.Run, mock.Anything, mock.Anything).After(time.Minute).Return(
		func(_ context.Context, in rollout.RunInput) (rollout.Summary, error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			ref := in.Rollout
			w.refs = append(w.refs, ref)
			v := ref.PolicyVersion
			if w.upstream != nil {
				v = w.upstream
			}
			return rollout.Summary{Key: ref.Key(), Index: ref.Index, K: ref.K, Status: rollout.StatusOK, Reward: 1, PolicyVersion: v}, nil
		})
}

// ran is the keys run, in order, and the version each was started on.
func (w *policyWorker) ran() (keys []string, versions []int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.refs {
		keys = append(keys, r.Key())
		v := int64(-1)
		if r.PolicyVersion != nil {
			v = *r.PolicyVersion
		}
		versions = append(versions, v)
	}
	return keys, versions
}

func version(v int64) *int64 { return &v }

// pullGroup runs a pull run of window 1 through: announce version 1, sample,
// a group of 3 under in's bound, announce version 2 while the group's
// second rollout runs (the third still waits for the window), then close.
// It returns the group's answer and the run's progress before the close.
func pullGroup(t *testing.T, w *policyWorker, in RunGroupInput) (*updateResult, PullProgress, *groupRecorder, *updateResult) {
	t.Helper()
	env := newEnv()
	w.register(env)
	g := &groupRecorder{}
	g.register(env, nil)
	group, backwards := &updateResult{}, &updateResult{}
	var prog PullProgress
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdatePolicy, "v1", &updateResult{}, PolicyInput{Version: 1})
		env.UpdateWorkflow(UpdateSample, "s", &updateResult{})
		env.UpdateWorkflow(UpdateRunGroup, "g", group, in)
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdatePolicy, "v2", &updateResult{}, PolicyInput{Version: 2})
		env.UpdateWorkflow(UpdatePolicy, "back", backwards, PolicyInput{Version: 1})
	}, 90*time.Second)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryProgress)
		require.NoError(t, err)
		require.NoError(t, v.Get(&prog))
		env.UpdateWorkflow(UpdateClose, "close", &updateResult{})
	}, time.Hour)
	env.ExecuteWorkflow(Pull, PullInput{Config: testConfig(0, 1, 1), Train: TrainConfig{Epochs: 1}})
	require.NoError(t, env.GetWorkflowError())
	require.True(t, group.done, "the group finished")
	require.NoError(t, group.rejected)
	require.NoError(t, group.err)
	return group, prog, g, backwards
}

// A version announced while a group runs is the one its waiting rollouts
// are generated on; once the group is done, the rollouts more than the
// bound behind the current version run again under keys of their own, on
// the current version, and every summary says how far off policy it is.
func TestPullAnnouncedVersionReachesWaitingRolloutsAndStaleOnesRerun(t *testing.T) {
	w := &policyWorker{}
	group, prog, g, backwards := pullGroup(t, w, RunGroupInput{Position: 0, N: 3, MaxOffPolicySteps: version(0)})

	res := group.value.(GroupResult)
	key := func(k int) string { return rollout.Key("run-1", res.Ref.Epoch, res.Ref.Index, k) }
	keys, versions := w.ran()
	require.Equal(t, []string{key(0), key(1), key(2), key(RerunK(0, 1)), key(RerunK(1, 1))}, keys,
		"k 0 and 1 ran on version 1, k 2 waited and ran on 2; the stale two ran again under new keys")
	require.Equal(t, []int64{1, 1, 2, 2, 2}, versions)
	require.Equal(t, key(256), key(RerunK(0, 1)), "a rerun's k is past every group's own")

	require.Len(t, res.Rollouts, 3)
	for k, s := range res.Rollouts {
		require.Equal(t, int64(2), *s.PolicyVersion, "rollout %d", k)
		require.Zero(t, s.OffPolicySteps, "rollout %d", k)
		require.False(t, s.Stale, "rollout %d", k)
	}
	require.Equal(t, key(RerunK(0, 1)), res.Rollouts[0].Key)
	require.Equal(t, 1, res.Rollouts[0].StaleReruns)
	require.Equal(t, key(2), res.Rollouts[2].Key)
	require.Zero(t, res.Rollouts[2].StaleReruns)
	require.Equal(t, [][]string{{key(RerunK(0, 1)), key(RerunK(1, 1)), key(2)}}, g.groups, "the group is scored on the rollouts it returns")

	require.Equal(t, int64(2), *prog.PolicyVersion, "progress reports the current version")
	require.ErrorContains(t, backwards.rejected, "only go forward")
}

// Asked to mark, a group returns its stale rollouts as they are, marked.
func TestPullMarksStaleRolloutsWhenAsked(t *testing.T) {
	w := &policyWorker{}
	group, _, _, _ := pullGroup(t, w, RunGroupInput{Position: 0, N: 3, MaxOffPolicySteps: version(0), OnStale: OnStaleMark})

	res := group.value.(GroupResult)
	keys, _ := w.ran()
	require.Len(t, keys, 3, "nothing ran again")
	for k, want := range []struct {
		stale bool
		off   int64
	}{{true, 1}, {true, 1}, {false, 0}} {
		s := res.Rollouts[k]
		require.Equal(t, want.stale, s.Stale, "rollout %d", k)
		require.Equal(t, want.off, s.OffPolicySteps, "rollout %d", k)
		require.Equal(t, rollout.Key("run-1", res.Ref.Epoch, res.Ref.Index, k), s.Key)
	}
}

// Without a bound nothing is stale or run again, but the summaries still
// say how far off policy they are.
func TestPullWithoutABoundOnlyCountsOffPolicySteps(t *testing.T) {
	w := &policyWorker{}
	group, _, _, _ := pullGroup(t, w, RunGroupInput{Position: 0, N: 3})

	res := group.value.(GroupResult)
	keys, _ := w.ran()
	require.Len(t, keys, 3)
	require.Equal(t, int64(1), res.Rollouts[0].OffPolicySteps)
	require.False(t, res.Rollouts[0].Stale)
}

// A rollout that stays stale (its upstream answers on an old version
// whatever the trainer announced) runs again at most MaxStaleReruns times,
// then comes back marked.
func TestPullStaleRerunsAreBounded(t *testing.T) {
	w := &policyWorker{upstream: version(0)}
	group, _, _, _ := pullGroup(t, w, RunGroupInput{Position: 0, N: 2, MaxOffPolicySteps: version(1)})

	res := group.value.(GroupResult)
	keys, _ := w.ran()
	require.Len(t, keys, 2*(1+MaxStaleReruns))
	for k, s := range res.Rollouts {
		require.True(t, s.Stale, "rollout %d", k)
		require.Equal(t, int64(2), s.OffPolicySteps)
		require.Equal(t, MaxStaleReruns, s.StaleReruns)
		require.Equal(t, rollout.Key("run-1", res.Ref.Epoch, res.Ref.Index, RerunK(k, MaxStaleReruns)), s.Key)
	}
}

// Bad bounds and versions are refused before they enter the history.
func TestPullRefusesBadBoundsAndVersions(t *testing.T) {
	env := newEnv()
	(&policyWorker{}).register(env)
	(&groupRecorder{}).register(env, nil)
	negBound, badOnStale, negVersion := &updateResult{}, &updateResult{}, &updateResult{}
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdateSample, "s", &updateResult{})
		env.UpdateWorkflow(UpdateRunGroup, "g1", negBound, RunGroupInput{Position: 0, N: 1, MaxOffPolicySteps: version(-1)})
		env.UpdateWorkflow(UpdateRunGroup, "g2", badOnStale, RunGroupInput{Position: 0, N: 1, OnStale: "drop"})
		env.UpdateWorkflow(UpdatePolicy, "v", negVersion, PolicyInput{Version: -3})
		env.UpdateWorkflow(UpdateClose, "close", &updateResult{})
	}, time.Second)
	env.ExecuteWorkflow(Pull, PullInput{Config: testConfig(0, 1, 1), Train: TrainConfig{Epochs: 1}})
	require.NoError(t, env.GetWorkflowError())
	require.ErrorContains(t, negBound.rejected, "max_off_policy_steps -1 is negative")
	require.ErrorContains(t, badOnStale.rejected, `on_stale "drop" is neither "rerun" nor "mark"`)
	require.ErrorContains(t, negVersion.rejected, "policy version -3 is negative")
}

// The current version travels through continue-as-new in the run's state:
// the next segment reports it and still refuses going back.
func TestPullCarriesThePolicyVersionThroughContinueAsNew(t *testing.T) {
	env := newEnv()
	(&policyWorker{}).register(env)
	(&groupRecorder{}).register(env, nil)
	back := &updateResult{}
	var prog PullProgress
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdatePolicy, "back", back, PolicyInput{Version: 6})
		v, err := env.QueryWorkflow(QueryProgress)
		require.NoError(t, err)
		require.NoError(t, v.Get(&prog))
		env.UpdateWorkflow(UpdateClose, "close", &updateResult{})
	}, time.Second)
	st := &PullState{TasksetLen: 8, Tasks: 8, Next: 2, Segment: 1, PolicyVersion: version(7)}
	env.ExecuteWorkflow(Pull, PullInput{Config: testConfig(0, 1, 1), Train: TrainConfig{Epochs: 1}, State: st})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, int64(7), *prog.PolicyVersion)
	require.ErrorContains(t, back.rejected, "policy version 6 is behind the run's current version 7")
}
