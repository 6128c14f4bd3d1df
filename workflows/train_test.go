package workflows

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/evalflow/evalflow/rollout"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// groupRecorder fakes the training activities around a fakeWorker.
type groupRecorder struct {
	mu       sync.Mutex
	groups   [][]string
	finished []int
}

func (g *groupRecorder) register(env *testsuite.TestWorkflowEnvironment, inventory []int) {
	env.OnActivity(a.ScoreGroup, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in rollout.ScoreGroupInput) (rollout.GroupSummary, error) {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.groups = append(g.groups, in.Keys)
			return rollout.GroupSummary{Key: in.RunID, Mean: 0.5, Std: 0.5}, nil
		})
	env.OnActivity(a.FinishEpoch, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in rollout.FinishEpochInput) error {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.finished = append(g.finished, in.Epoch)
			return nil
		})
	env.OnActivity(a.Inventory, mock.Anything, mock.Anything).Return(rollout.InventoryResult{Epochs: inventory}, nil)
}

func TestEpochRunsEachTaskOnceAsAScoredGroup(t *testing.T) {
	env := newEnv()
	f := newFakeWorker(10, 0)
	f.register(env, 0)
	g := &groupRecorder{}
	g.register(env, nil)
	cfg := testConfig(10, 4, 6)
	env.ExecuteWorkflow(Epoch, EpochInput{Config: cfg, Epoch: 1, TasksetLen: 10, Tasks: 10})

	require.NoError(t, env.GetWorkflowError())
	var res EpochResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Len(t, f.runs, 40)
	perm := Permutation(10, cfg.Seed, 1)
	for _, index := range perm {
		for k := range 4 {
			require.Equal(t, 1, f.runs[rollout.Key("run-1", 1, index, k)], "task %d sample %d", index, k)
		}
	}
	require.Len(t, g.groups, 10, "one scored group per task")
	for _, keys := range g.groups {
		require.Len(t, keys, 4)
	}
	require.Equal(t, []int{1}, g.finished)
	require.Equal(t, int64(10), res.Groups)
	require.Equal(t, int64(40), res.Ran)
	require.Len(t, res.Run.PassAtK, 4)
}

func TestEpochFailsPastMaxFailures(t *testing.T) {
	env := newEnv()
	f := newFakeWorker(20, 0)
	// Every third task's harness fails: a task error, recorded, not retried.
	f.taskFails = func(r rollout.Ref) bool { return r.Index%3 == 0 }
	f.register(env, 0)
	g := &groupRecorder{}
	g.register(env, nil)
	env.ExecuteWorkflow(Epoch, EpochInput{Config: testConfig(20, 1, 2), Train: TrainConfig{MaxFailures: 2}, Epoch: 0, TasksetLen: 20, Tasks: 20})

	err := env.GetWorkflowError()
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr))
	require.Equal(t, ErrEpochFailed, appErr.Type())
	require.Contains(t, err.Error(), "more than --max-failures 2")
	require.Contains(t, err.Error(), "harness_exit")
	require.Less(t, len(f.runs), 20, "the epoch stops starting rollouts once past the limit")
	require.Empty(t, g.finished, "a failed epoch is not recorded as finished")
}

func TestTrainSkipsFinishedEpochs(t *testing.T) {
	env := newEnv()
	env.RegisterWorkflowWithOptions(Epoch, workflow.RegisterOptions{Name: EpochName})
	f := newFakeWorker(5, 0)
	f.cost = 0.5
	f.register(env, 0)
	g := &groupRecorder{}
	g.register(env, []int{0})
	cfg := testConfig(0, 2, 4)
	env.ExecuteWorkflow(Train, TrainInput{Config: cfg, Train: TrainConfig{Epochs: 3}})

	require.NoError(t, env.GetWorkflowError())
	var res TrainResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, []int{0}, res.Skipped)
	require.Len(t, res.Epochs, 2)
	require.Equal(t, []int{1, 2}, g.finished)
	require.Len(t, f.runs, 2*5*2, "epochs 1 and 2, 5 tasks, groups of 2")
	for key := range f.runs {
		require.NotContains(t, key, "run-1/0/", "the finished epoch 0 must not run again")
	}
	require.Equal(t, int64(20), res.Ran)
	for _, e := range res.Epochs {
		require.InDelta(t, 5.0, e.Run.CostUSD, 1e-9, "epoch %d costs its 10 rollouts", e.Epoch)
	}
	require.InDelta(t, 10.0, res.CostUSD, 1e-9, "the run's cost sums its epochs'")
}

// TestTrainWaitsForAReplacedRunsEpoch: a run terminated and resumed at once
// finds its old epoch still running (the server ends children of a closed
// parent shortly after); it waits for it to end instead of failing.
func TestTrainWaitsForAReplacedRunsEpoch(t *testing.T) {
	env := newEnv()
	f := newFakeWorker(5, 0)
	f.register(env, 0)
	(&groupRecorder{}).register(env, nil)
	starts := 0
	env.RegisterWorkflowWithOptions(Epoch, workflow.RegisterOptions{Name: EpochName})
	env.OnWorkflow(EpochName, mock.Anything, mock.Anything).Return(
		func(_ workflow.Context, in EpochInput) (EpochResult, error) {
			starts++
			if starts <= 2 {
				return EpochResult{}, &temporal.ChildWorkflowExecutionAlreadyStartedError{}
			}
			return EpochResult{Epoch: in.Epoch, Run: Result{Rollouts: 10}}, nil
		})
	env.ExecuteWorkflow(Train, TrainInput{Config: testConfig(0, 2, 4), Train: TrainConfig{Epochs: 1}})

	require.NoError(t, env.GetWorkflowError())
	var res TrainResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, 3, starts, "started again until the old epoch had ended")
	require.Len(t, res.Epochs, 1)
}

func TestTrainRejectsAnInfiniteTasksetWithoutATaskCount(t *testing.T) {
	env := newEnv()
	f := newFakeWorker(-1, 0)
	f.register(env, 0)
	(&groupRecorder{}).register(env, nil)
	env.ExecuteWorkflow(Train, TrainInput{Config: testConfig(0, 1, 2), Train: TrainConfig{Epochs: 0}})
	err := env.GetWorkflowError()
	require.Error(t, err)
	require.Contains(t, err.Error(), "give --tasks")
}

// updateResult collects an update's outcome in the test environment.
type updateResult struct {
	rejected error
	value    any
	err      error
	done     bool
}

func (u *updateResult) Accept()                   {}
func (u *updateResult) Reject(err error)          { u.rejected, u.done = err, true }
func (u *updateResult) Complete(v any, err error) { u.value, u.err, u.done = v, err, true }

func TestPullHandsOutDisjointPositionsAndRunsGroups(t *testing.T) {
	env := newEnv()
	f := newFakeWorker(8, 0)
	f.register(env, 0)
	g := &groupRecorder{}
	g.register(env, nil)
	var samples []*updateResult
	var group, never, tooBig *updateResult
	env.RegisterDelayedCallback(func() {
		for i := range 10 {
			u := &updateResult{}
			samples = append(samples, u)
			env.UpdateWorkflow(UpdateSample, "s"+string(rune('a'+i)), u)
		}
		group, never, tooBig = &updateResult{}, &updateResult{}, &updateResult{}
		env.UpdateWorkflow(UpdateRunGroup, "g1", group, RunGroupInput{Position: 9, N: 3})
		env.UpdateWorkflow(UpdateRunGroup, "g2", never, RunGroupInput{Position: 10, N: 3})
		env.UpdateWorkflow(UpdateRunGroup, "g3", tooBig, RunGroupInput{Position: 1, N: MaxGroupSize + 1})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdateClose, "close", &updateResult{})
	}, time.Minute)
	cfg := testConfig(0, 1, 4)
	env.ExecuteWorkflow(Pull, PullInput{Config: cfg, Train: TrainConfig{Epochs: 2}})

	require.NoError(t, env.GetWorkflowError())
	seen := map[int64]bool{}
	for i, u := range samples {
		require.NoError(t, u.rejected)
		require.NoError(t, u.err)
		ref := u.value.(TaskRef)
		require.Equal(t, int64(i), ref.Position, "positions are handed out in order")
		require.False(t, seen[ref.Position])
		seen[ref.Position] = true
		epoch, index := NewCursor(8, cfg.Seed, cfg.Shuffle).Take(ref.Position, 8)
		require.Equal(t, epoch, ref.Epoch)
		require.Equal(t, index, ref.Index)
	}
	require.NoError(t, group.rejected)
	require.NoError(t, group.err)
	res := group.value.(GroupResult)
	require.Len(t, res.Rollouts, 3)
	require.Equal(t, 1, res.Ref.Epoch, "position 9 of an 8-task set is in epoch 1")
	require.ErrorContains(t, never.rejected, "never sampled")
	require.ErrorContains(t, tooBig.rejected, "outside")
	require.Len(t, g.groups, 1)
	require.True(t, env.IsWorkflowCompleted(), "close ends the run")
}
