package workflows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/evalflow/evalflow/rollout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// fakeWorker stands in for the activities: it records what ran and lets a
// test shape the rewards and failures.
type fakeWorker struct {
	mu       sync.Mutex
	cond     *sync.Cond
	size     int64
	window   int
	inflight int
	maxIn    int
	runs     map[string]int
	acquires map[string]int
	// fail returns an error for a Run attempt, or nil.
	fail func(ref rollout.Ref) error
	// taskFails says which rollouts end as task failures (harness exit).
	taskFails func(ref rollout.Ref) bool
	// refuses says which rollouts' tasks are refused as configured (the
	// activities record them as rollout.KindConfig).
	refuses func(ref rollout.Ref) bool
	// acquireFail returns an error for an Acquire attempt, or nil.
	acquireFail func(ref rollout.Ref) error
	// stored are the rollouts the run store holds, by key, as the
	// activities reuse or rerun them.
	stored map[string]rollout.Summary
	// cost is what each rollout run costs, in USD.
	cost float64
}

func newFakeWorker(size int64, window int) *fakeWorker {
	f := &fakeWorker{size: size, window: window, runs: map[string]int{}, acquires: map[string]int{}}
	f.cond = sync.NewCond(&f.mu)
	return f
}

func (f *fakeWorker) register(env *testsuite.TestWorkflowEnvironment, total int) {
	env.OnActivity(a.DescribeTaskset, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ rollout.DescribeTasksetInput) (rollout.DescribeTasksetResult, error) {
			return rollout.DescribeTasksetResult{Len: f.size}, nil
		})
	env.OnActivity(a.Acquire, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in rollout.AcquireInput) (rollout.AcquireResult, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.acquireFail != nil {
				if err := f.acquireFail(in.Rollout); err != nil {
					f.acquires[in.Rollout.Key()]++
					return rollout.AcquireResult{}, err
				}
			}
			if s, ok := f.stored[in.Rollout.Key()]; ok && (s.Status == rollout.StatusOK || !in.Rollout.RetryFailed) {
				s.Reused = true
				return rollout.AcquireResult{Done: &s}, nil
			}
			f.inflight++
			f.maxIn = max(f.maxIn, f.inflight)
			f.acquires[in.Rollout.Key()]++
			f.cond.Broadcast()
			return rollout.AcquireResult{HostQueue: "host-1"}, nil
		})
	env.OnActivity(a.Expose, mock.Anything, mock.Anything).Return(rollout.ExposeResult{BaseURL: "http://127.0.0.1:1"}, nil)
	env.OnActivity(a.Release, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(a.Finish, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(a.Run, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in rollout.RunInput) (rollout.Summary, error) {
			ref := in.Rollout
			f.mu.Lock()
			defer f.mu.Unlock()
			// Hold this rollout until the window is full (or every rollout has
			// started), so the window's bound is actually exercised. Only an
			// Acquire can make this true, and each one broadcasts; a workflow
			// that stopped filling its window would leave the test environment
			// idle, which fails the test.
			for f.window > 0 && f.inflight < f.window && f.started() < total {
				f.cond.Wait()
			}
			f.inflight--
			if f.fail != nil {
				if err := f.fail(ref); err != nil {
					return rollout.Summary{}, err
				}
			}
			f.runs[ref.Key()]++
			if f.taskFails != nil && f.taskFails(ref) {
				return rollout.Summary{Key: ref.Key(), Index: ref.Index, K: ref.K, Status: rollout.StatusError, ErrorKind: rollout.KindHarnessExit}, nil
			}
			if f.refuses != nil && f.refuses(ref) {
				return rollout.Summary{Key: ref.Key(), Index: ref.Index, K: ref.K, Status: rollout.StatusError, ErrorKind: rollout.KindConfig,
					Error: fmt.Sprintf("task t%d: the image of environment/Dockerfile does not build: exit status 100", ref.Index)}, nil
			}
			reward := 0.0
			if ref.Index%2 == 0 {
				reward = 1
			}
			_, rerun := f.stored[ref.Key()]
			return rollout.Summary{Key: ref.Key(), Index: ref.Index, K: ref.K, Reward: reward, Status: rollout.StatusOK, Turns: 2, DurationMS: 10, Rerun: rerun, CostUSD: f.cost}, nil
		})
}

func (f *fakeWorker) started() int {
	n := 0
	for _, c := range f.acquires {
		n += c
	}
	return n
}

func testConfig(tasks int64, k, window int) RunConfig {
	return RunConfig{RunID: "run-1", Taskset: "sample", Tasks: tasks, RolloutsPerTask: k, MaxConcurrent: window, Model: "mock", Shuffle: true, Seed: 3}
}

func TestEvalRunsEveryRolloutWithinTheWindow(t *testing.T) {
	env := newEnv()
	f := newFakeWorker(40, 4)
	f.register(env, 20*2)
	res := runEval(t, env, testConfig(20, 2, 4))
	require.Equal(t, int64(40), res.Rollouts)
	require.Len(t, f.runs, 40, "every (index, k) runs exactly once")
	for key, n := range f.runs {
		require.Equal(t, 1, n, "rollout %s ran %d times", key, n)
	}
	require.Equal(t, 4, f.maxIn, "in-flight rollouts must fill, and never exceed, the window")
	// 20 distinct tasks out of 40, each run twice.
	indexes := map[int64]bool{}
	for key := range f.runs {
		var run string
		var epoch, k int
		var index int64
		_, err := sscanKey(key, &run, &epoch, &index, &k)
		require.NoError(t, err)
		indexes[index] = true
	}
	require.Len(t, indexes, 20)
	require.Len(t, res.PassAtK, 2)
	require.InDelta(t, res.MeanReward, res.PassAtK[0].Value, 1e-9, "with deterministic rewards pass@1 equals the mean")
	require.Equal(t, int64(20), res.Tasks)
}

func TestEvalContinuesAsNewCarryingState(t *testing.T) {
	cfg := testConfig(12, 1, 3)
	cfg.Limits.ContinueAsNewAfter = 5
	f := newFakeWorker(12, 0)
	in := EvalInput{Config: cfg}
	var segments int
	for {
		env := newEnv()
		f.register(env, 12)
		env.ExecuteWorkflow(Eval, in)
		require.True(t, env.IsWorkflowCompleted())
		segments++
		err := env.GetWorkflowError()
		var can *workflow.ContinueAsNewError
		if errors.As(err, &can) {
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &in))
			require.NotNil(t, in.State)
			require.Equal(t, int64(5*segments), in.State.Agg.Rollouts, "aggregates carried through continue-as-new")
			continue
		}
		require.NoError(t, err)
		var res Result
		require.NoError(t, env.GetWorkflowResult(&res))
		require.Equal(t, int64(12), res.Rollouts)
		require.Equal(t, 3, res.Segments)
		break
	}
	require.Equal(t, 3, segments)
	require.Len(t, f.runs, 12, "each task exactly once across segments")
	// With seed 3 the first task is the cursor's first position.
	_, first := NewCursor(12, 3, true).At(0)
	require.Contains(t, f.runs, rollout.Key("run-1", 0, first, 0))
}

func TestEvalRetriesInfrastructureFailures(t *testing.T) {
	env := newEnv()
	f := newFakeWorker(6, 0)
	f.fail = func(ref rollout.Ref) error {
		switch {
		case ref.Index == 2 && ref.Attempt == 1:
			return temporal.NewApplicationError("tunnel dropped", rollout.ErrTypeTunnel)
		case ref.Index == 4:
			return temporal.NewApplicationError("provider down", rollout.ErrTypeUpstream)
		}
		return nil
	}
	f.register(env, 6)
	cfg := testConfig(6, 1, 2)
	cfg.Shuffle = false
	res := runEval(t, env, cfg)
	require.Equal(t, int64(6), res.Rollouts)
	require.Equal(t, int64(1), res.Failed, "only the rollout that kept failing is a failure")
	require.Equal(t, []KindCount{{Kind: rollout.KindInfra, Count: 1}}, res.Errors)
	require.Equal(t, 2, f.acquires[rollout.Key("run-1", 0, 2, 0)], "a failed attempt re-acquires a slot")
	require.Equal(t, DefaultMaxAttempts, f.acquires[rollout.Key("run-1", 0, 4, 0)])
}

// A rollout a stopping worker handed back runs again without spending one
// of its attempts, up to a bound.
func TestEvalHandedBackAttemptsAreFree(t *testing.T) {
	env := newEnv()
	f := newFakeWorker(3, 0)
	f.fail = func(ref rollout.Ref) error {
		switch {
		case ref.Index == 1 && ref.Attempt <= 2:
			return temporal.NewApplicationError("the worker stopped before the rollout ended", rollout.ErrTypeWorkerStopped)
		case ref.Index == 2:
			return temporal.NewApplicationError("the worker stopped before the rollout ended", rollout.ErrTypeWorkerStopped)
		}
		return nil
	}
	f.register(env, 3)
	cfg := testConfig(3, 1, 3)
	cfg.Shuffle = false
	cfg.Limits.MaxAttempts = 1
	res := runEval(t, env, cfg)
	assert.Equal(t, int64(2), res.OK, "handed back twice with one attempt allowed, the rollout still ran")
	assert.Equal(t, 3, f.acquires[rollout.Key("run-1", 0, 1, 0)])
	assert.Equal(t, maxHandBacks+1, f.acquires[rollout.Key("run-1", 0, 2, 0)], "hand-backs are bounded")
	assert.Equal(t, []KindCount{{Kind: rollout.KindInfra, Count: 1}}, res.Errors)
}

// A container engine that could not be reached is waited for, minutes at
// a time, without spending the rollout's attempts; one that never comes
// back ends the rollout as infrastructure after maxEngineWait, never as
// the agent's.
func TestEvalWaitsOutAnEngineThatIsGone(t *testing.T) {
	env := newEnv()
	f := newFakeWorker(2, 0)
	down := temporal.NewApplicationError("harness runtime: the container engine could not be reached", rollout.ErrTypeEngine)
	f.fail = func(ref rollout.Ref) error {
		if ref.Index == 1 || ref.Attempt <= 4 {
			return down
		}
		return nil
	}
	f.register(env, 2)
	cfg := testConfig(2, 1, 2)
	cfg.Shuffle = false
	cfg.Limits.MaxAttempts = 2
	start := env.Now()
	res := runEval(t, env, cfg)
	assert.Equal(t, int64(1), res.OK, "four attempts met no engine with two allowed, and the rollout still ran")
	assert.Equal(t, 5, f.acquires[rollout.Key("run-1", 0, 0, 0)])
	assert.Equal(t, []KindCount{{Kind: rollout.KindInfra, Count: 1}}, res.Errors, "an engine that never came back is infrastructure")
	waits := 0
	for d := time.Duration(0); d < maxEngineWait; waits++ {
		d += engineBackoff(waits + 1)
	}
	assert.Equal(t, waits+cfg.Limits.MaxAttempts, f.acquires[rollout.Key("run-1", 0, 1, 0)],
		"the rollout waits until maxEngineWait, then its attempts count again")
	assert.GreaterOrEqual(t, env.Now().Sub(start), maxEngineWait, "the waits are minutes, not seconds")
}

// A task refused as configured (its image does not build) is recorded as
// such, and the run goes on with the other tasks: the refused rollouts
// are failures of kind config, named with their reason, and left out of
// the mean and pass@k rather than scored 0.
func TestEvalGoesOnPastARefusedTask(t *testing.T) {
	env := newEnv()
	f := newFakeWorker(4, 0)
	f.refuses = func(ref rollout.Ref) bool { return ref.Index == 1 }
	f.register(env, 8)
	cfg := testConfig(4, 2, 2)
	cfg.Shuffle = false
	res := runEval(t, env, cfg)
	assert.Equal(t, int64(8), res.Rollouts, "every rollout ran")
	assert.Equal(t, int64(6), res.OK)
	assert.Equal(t, int64(2), res.Failed)
	assert.Equal(t, int64(2), res.Refused)
	assert.Equal(t, []KindCount{{Kind: rollout.KindConfig, Count: 2}}, res.Errors)
	require.Len(t, res.FailedSamples, 2)
	assert.Contains(t, res.FailedSamples[0].Error, "task t1: the image of environment/Dockerfile does not build")
	// Tasks 0 and 2 score 1, task 3 scores 0 (the fake's rewards); task 1
	// is in neither the mean nor pass@k.
	assert.InDelta(t, 4.0/6, res.MeanReward, 1e-9, "the mean of the scored rollouts")
	require.NotEmpty(t, res.PassAtK)
	assert.InDelta(t, 2.0/3, res.PassAtK[0].Value, 1e-9, "pass@1 over the three tasks scored")
}

// A run whose every task is refused scores nothing: its mean is no 0.
func TestEvalWithEveryTaskRefusedScoresNothing(t *testing.T) {
	env := newEnv()
	f := newFakeWorker(2, 0)
	f.refuses = func(rollout.Ref) bool { return true }
	f.register(env, 2)
	res := runEval(t, env, testConfig(2, 1, 2))
	assert.Equal(t, int64(2), res.Refused)
	assert.Equal(t, res.Rollouts, res.Refused)
	assert.Empty(t, res.PassAtK, "no task scored")
	f2 := figures(Aggregates{Rollouts: 2, Failed: 2, Refused: 2, Errors: res.Errors}, 2, 0, true)
	assert.Equal(t, "finished: 2 rollouts, 2 failed (config 2), no rollout scored", f2.String())
}

func TestEvalFailsOnConfigErrors(t *testing.T) {
	env := newEnv()
	f := newFakeWorker(6, 0)
	f.fail = func(rollout.Ref) error {
		return temporal.NewNonRetryableApplicationError(`harness command "nope" not found`, rollout.ErrTypeConfig, nil)
	}
	f.register(env, 6)
	env.ExecuteWorkflow(Eval, EvalInput{Config: testConfig(6, 1, 2)})
	err := env.GetWorkflowError()
	require.Error(t, err)
	require.Contains(t, err.Error(), "not found")
}

func TestEvalRejectsMoreTasksThanTheTaskset(t *testing.T) {
	env := newEnv()
	f := newFakeWorker(10, 0)
	f.register(env, 0)
	env.ExecuteWorkflow(Eval, EvalInput{Config: testConfig(11, 1, 2)})
	err := env.GetWorkflowError()
	require.Error(t, err)
	require.Contains(t, err.Error(), "does not wrap")
	require.Empty(t, f.runs)
}

// An eval run again under its run id reuses what the store holds; with
// RetryFailed it reruns the stored failures and keeps the successes, and the
// summary says how many of each.
func TestEvalRetryFailedRerunsStoredFailures(t *testing.T) {
	stored := map[string]rollout.Summary{}
	for index, kind := range []string{"", "", rollout.KindTimeout, rollout.KindHarnessExit} {
		key := rollout.Key("run-1", 0, int64(index), 0)
		s := rollout.Summary{Key: key, Index: int64(index), Status: rollout.StatusOK, Reward: 1}
		if kind != "" {
			s = rollout.Summary{Key: key, Index: int64(index), Status: rollout.StatusError, ErrorKind: kind}
		}
		stored[key] = s
	}
	for _, retry := range []bool{false, true} {
		env := newEnv()
		f := newFakeWorker(6, 0)
		f.stored = stored
		f.register(env, 6)
		cfg := testConfig(6, 1, 2)
		cfg.Shuffle = false
		cfg.RetryFailed = retry
		res := runEval(t, env, cfg)
		require.Equal(t, int64(6), res.Rollouts)
		if !retry {
			require.Equal(t, int64(4), res.Reused, "every stored rollout is reused")
			require.Zero(t, res.Rerun)
			require.Equal(t, int64(2), res.Failed, "the stored failures stand")
			require.Len(t, f.runs, 2)
			continue
		}
		require.Equal(t, int64(2), res.Reused, "stored successes are kept")
		require.Equal(t, int64(2), res.Rerun, "stored failures run again")
		require.Zero(t, res.Failed)
		require.Len(t, f.runs, 4)
		for index := range 2 {
			require.Zero(t, f.runs[rollout.Key("run-1", 0, int64(index), 0)], "success %d is not rerun", index)
		}
		for index := 2; index < 4; index++ {
			require.Equal(t, 1, f.runs[rollout.Key("run-1", 0, int64(index), 0)], "failure %d is rerun", index)
		}
	}
}

// An Acquire that keeps failing (a server that cannot start) ends the
// rollout as an infrastructure failure in bounded time, instead of being
// retried for ever while the run hangs.
func TestRolloutAcquireFailuresAreBounded(t *testing.T) {
	env := newEnv()
	f := newFakeWorker(3, 0)
	const runaway = 1000
	f.acquireFail = func(ref rollout.Ref) error {
		if ref.Index != 1 {
			return nil
		}
		if f.acquires[ref.Key()] >= runaway {
			return temporal.NewNonRetryableApplicationError("Acquire retried without bound", "Runaway", nil)
		}
		return errors.New("acquire slot: interception listen: listen tcp 127.0.0.1:0: socket: too many open files")
	}
	f.register(env, 3)
	cfg := testConfig(3, 1, 2)
	cfg.Shuffle = false
	start := env.Now()
	res := runEval(t, env, cfg)
	require.Equal(t, int64(3), res.Rollouts)
	require.Equal(t, []KindCount{{Kind: rollout.KindInfra, Count: 1}}, res.Errors)
	require.Contains(t, res.FailedSamples[0].Error, "too many open files")
	require.Equal(t, DefaultMaxAttempts*acquireAttempts, f.acquires[rollout.Key("run-1", 0, 1, 0)])
	require.Less(t, env.Now().Sub(start), 10*time.Minute, "the failure ends within minutes")
}

// A fixed port in use fails the run at once, with the reason.
func TestEvalFailsWhenTheInterceptionPortIsInUse(t *testing.T) {
	env := newEnv()
	f := newFakeWorker(4, 0)
	f.acquireFail = func(rollout.Ref) error {
		return temporal.NewNonRetryableApplicationError("the interception server cannot listen: port 8000 is in use", rollout.ErrTypeConfig, nil)
	}
	f.register(env, 4)
	env.ExecuteWorkflow(Eval, EvalInput{Config: testConfig(4, 1, 2)})
	err := env.GetWorkflowError()
	require.Error(t, err)
	require.Contains(t, err.Error(), "port 8000 is in use")
	for key, n := range f.acquires {
		require.Equal(t, 1, n, "%s: a configuration error is not retried", key)
	}
	require.Empty(t, f.runs)
}

// newEnv is a test environment that keeps the SDK's logs out of test output.
// Its idle limit (wall clock, while activities hold the workflow) is
// generous: on a loaded machine an activity may wait seconds for a CPU.
func newEnv() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(time.Minute)
	return env
}

// runEval runs an eval of cfg in env to its end and returns its result.
func runEval(t *testing.T, env *testsuite.TestWorkflowEnvironment, cfg RunConfig) Result {
	t.Helper()
	env.ExecuteWorkflow(Eval, EvalInput{Config: cfg})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res Result
	require.NoError(t, env.GetWorkflowResult(&res))
	return res
}

// An eval past its --max-failures ends failed once every rollout is stored,
// its result in the error's details; at or under the limit it completes.
func TestEvalPastMaxFailuresEndsFailed(t *testing.T) {
	for _, tc := range []struct {
		name        string
		maxFailures float64
		wantFailed  bool
	}{
		{"no limit", 0, false},
		{"a count it stays within", 3, false},
		{"a count it passes", 2, true},
		{"a fraction it passes", 0.25, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv()
			f := newFakeWorker(8, 0)
			f.taskFails = func(ref rollout.Ref) bool { return ref.Index%3 == 0 } // 3 of 8
			f.register(env, 8)
			cfg := testConfig(8, 1, 4)
			cfg.MaxFailures = tc.maxFailures
			env.ExecuteWorkflow(Eval, EvalInput{Config: cfg})

			require.True(t, env.IsWorkflowCompleted())
			err := env.GetWorkflowError()
			if !tc.wantFailed {
				require.NoError(t, err)
				return
			}
			var appErr *temporal.ApplicationError
			require.ErrorAs(t, err, &appErr)
			assert.Equal(t, ErrRunFailed, appErr.Type())
			assert.Contains(t, appErr.Error(), "3 of 8 rollouts failed")
			var res Result
			require.NoError(t, appErr.Details(&res), "the result travels with the error")
			assert.Equal(t, int64(3), res.Failed)
			assert.Equal(t, int64(8), res.Rollouts)
		})
	}
}

// An eval whose stored rollouts cost its --max-run-cost starts no more: the
// rollouts in flight finish and are counted, the run ends saying why, and a
// resume with a higher bound reuses every stored rollout and runs the rest.
func TestEvalStopsAtItsRunCost(t *testing.T) {
	env := newEnv()
	f := newFakeWorker(10, 0)
	f.cost = 0.25
	f.register(env, 10)
	cfg := testConfig(10, 1, 2)
	cfg.MaxRunCostUSD = 1
	res := runEval(t, env, cfg)
	assert.Equal(t, StoppedMaxRunCost, res.Stopped)
	assert.Less(t, res.Rollouts, int64(10), "no rollout starts once the cost is reached")
	assert.GreaterOrEqual(t, res.CostUSD, 1.0)
	assert.Less(t, res.CostUSD, 1.0+2*0.25, "at most the window's rollouts finish past the bound")
	assert.InDelta(t, 0.25*float64(res.Rollouts), res.CostUSD, 1e-9, "the run's cost sums its rollouts'")
	require.Len(t, f.runs, int(res.Rollouts), "every rollout started is counted")
	require.Equal(t, int(res.Rollouts), f.started(), "every rollout started finished")

	stored := map[string]rollout.Summary{}
	for key := range f.runs {
		stored[key] = rollout.Summary{Key: key, Status: rollout.StatusOK, CostUSD: 0.25}
	}
	env = newEnv()
	g := newFakeWorker(10, 0)
	g.cost = 0.25
	g.stored = stored
	g.register(env, 10)
	cfg.MaxRunCostUSD = 10
	env.ExecuteWorkflow(Eval, EvalInput{Config: cfg})
	require.NoError(t, env.GetWorkflowError())
	var resumed Result
	require.NoError(t, env.GetWorkflowResult(&resumed))
	assert.Empty(t, resumed.Stopped)
	assert.Equal(t, int64(10), resumed.Rollouts)
	assert.Equal(t, res.Rollouts, resumed.Reused, "the stored rollouts are reused")
	assert.Len(t, g.runs, 10-int(res.Rollouts), "only the rest run")
	assert.InDelta(t, 2.5, resumed.CostUSD, 1e-9)
}

func TestSumCostCountsUnpricedRollouts(t *testing.T) {
	usd, unpriced := SumCost([]rollout.Summary{{CostUSD: 0.5}, {CostUSD: 0.25, UnpricedTurns: 2}, {}})
	assert.InDelta(t, 0.75, usd, 1e-12)
	assert.Equal(t, int64(1), unpriced)
}
