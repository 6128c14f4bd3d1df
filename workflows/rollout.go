package workflows

import (
	"errors"
	"time"

	"github.com/evalflow/evalflow/rollout"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// runRollout runs one rollout to a Summary, retrying infrastructure failures
// (a lost worker, a tunnel, an upstream outage) up to the run's MaxAttempts by
// re-acquiring a slot, possibly on another worker. A returned error is fatal
// to the run: the configuration cannot work.
func runRollout(ctx workflow.Context, ref rollout.Ref, lim Limits) (rollout.Summary, error) {
	for attempt := 1; ; attempt++ {
		ref.Attempt = attempt
		s, err := rolloutAttempt(ctx, ref, lim)
		if err == nil {
			return s, nil
		}
		if isType(err, rollout.ErrTypeConfig) {
			return rollout.Summary{}, err
		}
		if ctx.Err() != nil || attempt >= lim.MaxAttempts {
			return rollout.Summary{
				Key: ref.Key(), Index: ref.Index, K: ref.K,
				Status: rollout.StatusError, ErrorKind: rollout.KindInfra,
				Error: shorten(err.Error(), 300),
			}, nil
		}
		workflow.GetLogger(ctx).Warn("rollout attempt failed; retrying", "key", ref.Key(), "attempt", attempt, "error", err)
		if err := workflow.Sleep(ctx, backoff(attempt)); err != nil {
			return rollout.Summary{}, err
		}
	}
}

// rolloutAttempt is acquire → expose → run on the acquiring worker's own queue.
func rolloutAttempt(ctx workflow.Context, ref rollout.Ref, lim Limits) (rollout.Summary, error) {
	acquireCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// Acquire waits for capacity on a worker as long as it takes,
		// heartbeating meanwhile: a dead worker is noticed by its heartbeat.
		StartToCloseTimeout: acquireWaitLimit,
		HeartbeatTimeout:    lim.HeartbeatTimeout,
		// Anything else that keeps failing (a server that cannot start) ends
		// the attempt, so the rollout is recorded failed in bounded time
		// instead of hanging the run.
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			MaximumAttempts:        acquireAttempts,
			NonRetryableErrorTypes: []string{rollout.ErrTypeConfig},
		},
	})
	var slot rollout.AcquireResult
	if err := workflow.ExecuteActivity(acquireCtx, rollout.ActivityAcquire, rollout.AcquireInput{Rollout: ref}).Get(ctx, &slot); err != nil {
		return rollout.Summary{}, err
	}
	if slot.Done != nil {
		// Already in the run store (a resumed run): nothing to run.
		return *slot.Done, nil
	}

	host := workflow.WithTaskQueue(ctx, slot.HostQueue)
	exposeCtx := workflow.WithActivityOptions(host, workflow.ActivityOptions{
		// A worker that died after Acquire never starts these: fail fast and
		// re-acquire elsewhere.
		ScheduleToStartTimeout: lim.HostStartTimeout,
		StartToCloseTimeout:    2 * time.Minute,
		// A worker that dies while exposing is noticed within this.
		HeartbeatTimeout: lim.HeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			MaximumAttempts:        6,
			NonRetryableErrorTypes: []string{rollout.ErrTypeSlotLost, rollout.ErrTypeConfig},
		},
	})
	var exp rollout.ExposeResult
	if err := workflow.ExecuteActivity(exposeCtx, rollout.ActivityExpose, rollout.ExposeInput{Key: ref.Key()}).Get(ctx, &exp); err != nil {
		release(host, ref.Key(), lim)
		return rollout.Summary{}, err
	}

	runCtx := workflow.WithActivityOptions(host, workflow.ActivityOptions{
		ScheduleToStartTimeout: lim.HostStartTimeout,
		StartToCloseTimeout:    ref.Harness.Timeout + 2*time.Minute,
		HeartbeatTimeout:       lim.HeartbeatTimeout,
		// The workflow retries the whole rollout, so that a dead worker's
		// rollout moves to a live one instead of waiting on a dead queue.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var s rollout.Summary
	if err := workflow.ExecuteActivity(runCtx, rollout.ActivityRun, rollout.RunInput{Rollout: ref, BaseURL: exp.BaseURL}).Get(ctx, &s); err != nil {
		return rollout.Summary{}, err
	}
	return s, nil
}

// release frees a slot whose rollout will not run. Best effort: the worker
// also expires slots that are never run.
func release(host workflow.Context, key string, lim Limits) {
	ctx, cancel := workflow.NewDisconnectedContext(host)
	defer cancel()
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ScheduleToStartTimeout: lim.HostStartTimeout,
		StartToCloseTimeout:    30 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	_ = workflow.ExecuteActivity(ctx, rollout.ActivityRelease, rollout.ReleaseInput{Key: key}).Get(ctx, nil)
}

// acquireAttempts bounds how often one rollout attempt's Acquire is tried.
const acquireAttempts = 5

// acquireWaitLimit bounds one Acquire's wait for capacity. Waiting is not a
// failure: the limit is far beyond any run, so a full fleet makes rollouts
// wait, never fail.
const acquireWaitLimit = 365 * 24 * time.Hour

func backoff(attempt int) time.Duration {
	d := time.Second << min(attempt-1, 5)
	return min(d, 30*time.Second)
}

func isType(err error, typ string) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == typ
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
