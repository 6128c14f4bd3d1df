package workflows

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/evalflow/evalflow/rollout"
)

// holdingWorker stands in for workers whose Acquire holds its slot: it
// signals the workflow where the slot is and returns once the rollout's Run
// has started, as activities.Acquire does with AcquireInput.Hold.
type holdingWorker struct {
	env *testsuite.TestWorkflowEnvironment

	mu      sync.Mutex
	cond    *sync.Cond
	started map[string]bool // rollout keys whose Run started
	// acquires counts Acquire calls by key; exposes and runs count steps by
	// host queue.
	acquires map[string]int
	exposes  map[string]int
	runs     map[string]int
	holds    []string // the Hold tokens Acquire was given
	// cancelled counts Runs that ended because the workflow cancelled them.
	cancelled int

	// baseURL is what the slot signal carries: empty makes the workflow Expose.
	baseURL string
	// host names the host queue of an Acquire by its attempt (1, 2, …).
	host func(attempt int32) string
	// dies makes the Acquire of a given attempt fail after its signal,
	// before the rollout's Run starts: its worker died.
	dies func(attempt int32) bool

	// verified makes Run leave every rollout for Verify, as a task with a
	// verifier does; verify stands in for Verify then.
	verified     bool
	verify       func(ctx context.Context, in rollout.VerifyInput) (rollout.Summary, error)
	verifies     map[string]int // Verify calls by host queue
	verifyWithin []time.Duration
}

func newHoldingWorker(env *testsuite.TestWorkflowEnvironment) *holdingWorker {
	h := &holdingWorker{
		env: env, started: map[string]bool{}, acquires: map[string]int{}, exposes: map[string]int{}, runs: map[string]int{},
		host: func(int32) string { return "host-1" },
		dies: func(int32) bool { return false },
		verify: func(_ context.Context, in rollout.VerifyInput) (rollout.Summary, error) {
			return rollout.Summary{Key: in.Rollout.Key(), Index: in.Rollout.Index, Status: rollout.StatusOK, Reward: 1}, nil
		},
		verifies: map[string]int{},
	}
	h.cond = sync.NewCond(&h.mu)
	env.OnActivity(a.DescribeTaskset, mock.Anything, mock.Anything).Return(rollout.DescribeTasksetResult{Len: 100}, nil)
	env.OnActivity(a.Finish, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(a.Release, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(a.Acquire, mock.Anything, mock.Anything).Return(h.acquire)
	env.OnActivity(a.Expose, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in rollout.ExposeInput) (rollout.ExposeResult, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.exposes[activity.GetInfo(ctx).TaskQueue]++
			return rollout.ExposeResult{BaseURL: "http://exposed"}, nil
		})
	env.OnActivity(a.Run, mock.Anything, mock.Anything).Return(h.run)
	env.OnActivity(a.Verify, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in rollout.VerifyInput) (rollout.Summary, error) {
			h.mu.Lock()
			h.verifies[activity.GetInfo(ctx).TaskQueue]++
			h.mu.Unlock()
			return h.verify(ctx, in)
		})
	return h
}

func (h *holdingWorker) acquire(ctx context.Context, in rollout.AcquireInput) (rollout.AcquireResult, error) {
	key := in.Rollout.Key()
	attempt := activity.GetInfo(ctx).Attempt
	host := h.host(attempt)
	h.mu.Lock()
	h.acquires[key]++
	h.holds = append(h.holds, in.Hold)
	h.mu.Unlock()
	if in.Hold == "" {
		return rollout.AcquireResult{HostQueue: host}, nil
	}
	if host != "" { // "": the worker died before it could tell where the slot is
		h.env.SignalWorkflow(rollout.SignalSlot, rollout.Slot{Token: in.Hold, Key: key, HostQueue: host, BaseURL: h.baseURL})
	}
	if h.dies(attempt) {
		return rollout.AcquireResult{}, temporal.NewApplicationError("activity heartbeat timeout", "HeartbeatTimeout")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for !h.started[key] {
		h.cond.Wait()
	}
	return rollout.AcquireResult{HostQueue: host}, nil
}

// run stands in for Run on the worker's own queue: a queue whose worker is
// dead never starts it, so it waits there until the workflow cancels it.
func (h *holdingWorker) run(ctx context.Context, in rollout.RunInput) (rollout.Summary, error) {
	queue := activity.GetInfo(ctx).TaskQueue
	key := in.Rollout.Key()
	if queue == "dead-host" {
		<-ctx.Done()
		h.mu.Lock()
		h.cancelled++
		h.mu.Unlock()
		return rollout.Summary{}, ctx.Err()
	}
	h.mu.Lock()
	h.started[key] = true
	h.runs[queue]++
	h.verifyWithin = append(h.verifyWithin, in.VerifyWithin)
	h.cond.Broadcast()
	h.mu.Unlock()
	if h.verified {
		return rollout.Summary{Key: key, Index: in.Rollout.Index, Status: rollout.StatusOK, Verify: &rollout.VerifyPlan{Timeout: time.Minute}}, nil
	}
	return rollout.Summary{Key: key, Index: in.Rollout.Index, Status: rollout.StatusOK, Reward: 1}, nil
}

func runHeldEval(t *testing.T, env *testsuite.TestWorkflowEnvironment, tasks int64) Result {
	t.Helper()
	res := runEval(t, env, testConfig(tasks, 1, 4))
	return res
}

func TestHeldSlotOnLoopbackSkipsExpose(t *testing.T) {
	env := newEnv()
	h := newHoldingWorker(env)
	h.baseURL = "http://127.0.0.1:9"
	res := runHeldEval(t, env, 8)

	assert.Equal(t, int64(8), res.OK)
	assert.Equal(t, 8, h.runs["host-1"], "every Run on the holding worker's queue")
	assert.Empty(t, h.exposes, "a slot that names its URL needs no Expose")
	require.Len(t, h.holds, 8)
	seen := map[string]bool{}
	for _, token := range h.holds {
		assert.NotEmpty(t, token, "every Acquire holds its slot")
		assert.False(t, seen[token], "each attempt has a token of its own")
		seen[token] = true
	}
}

func TestHeldSlotWithoutURLIsExposedOnItsHost(t *testing.T) {
	env := newEnv()
	h := newHoldingWorker(env)
	res := runHeldEval(t, env, 5)

	assert.Equal(t, int64(5), res.OK)
	assert.Equal(t, 5, h.exposes["host-1"], "Expose runs on the holding worker's queue")
	assert.Equal(t, 5, h.runs["host-1"])
}

// TestHeldSlotOfADeadWorkerMovesElsewhere: the worker that signalled a slot
// dies before the rollout's Run starts (its queue never starts it); its
// Acquire fails and is retried on a live worker, whose signal abandons the
// steps waiting on the dead one — with no schedule-to-start timeout.
func TestHeldSlotOfADeadWorkerMovesElsewhere(t *testing.T) {
	env := newEnv()
	h := newHoldingWorker(env)
	h.baseURL = "http://127.0.0.1:9"
	h.host = func(attempt int32) string {
		if attempt == 1 {
			return "dead-host"
		}
		return "host-2"
	}
	h.dies = func(attempt int32) bool { return attempt == 1 }
	res := runHeldEval(t, env, 3)

	assert.Equal(t, int64(3), res.OK, "every rollout ends ok: %+v", res.Errors)
	assert.Equal(t, 3, h.runs["host-2"], "every Run on the live worker, once")
	assert.LessOrEqual(t, h.cancelled, 3, "a Run waiting on the dead worker's queue is cancelled, never run")
	for key, n := range h.acquires {
		assert.Equal(t, 2, n, "%s acquired on the dead worker, then on the live one", key)
	}
}

func TestHeldSlotsThatAllDieEndAsInfrastructure(t *testing.T) {
	// A rollout whose every holder dies is an infrastructure failure,
	// retried, and recorded as one once its attempts run out: never the
	// agent's.
	env := newEnv()
	h := newHoldingWorker(env)
	h.baseURL = "http://127.0.0.1:9"
	h.host = func(int32) string { return "" }
	h.dies = func(int32) bool { return true }
	cfg := testConfig(1, 1, 1)
	cfg.Limits.MaxAttempts = 2
	res := runEval(t, env, cfg)
	assert.Equal(t, int64(1), res.Failed)
	require.Len(t, res.Errors, 1)
	assert.Equal(t, rollout.KindInfra, res.Errors[0].Kind)
}
