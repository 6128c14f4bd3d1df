package workflows

import (
	"errors"
	"fmt"
	"time"

	"github.com/evalflow/evalflow/rollout"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// heldSlots is the change that made Acquire hold its slot until the
// rollout's Run starts (rollout.AcquireInput.Hold): histories recorded
// before it replay the attempts of rolloutAttempt.
const heldSlots = "held-slots"

// verifyStep is the change that runs a verified task's Verify after its
// Run (rollout.RunInput.VerifyWithin): histories recorded before it replay
// Run alone.
const verifyStep = "verify-step"

// uiMetadata is the change that labels what the Temporal UI shows: each
// rollout activity carries a summary naming its rollout, runs upsert their
// live figures into the memo, and epochs carry the run's search attributes.
const uiMetadata = "ui-metadata"

// freeHandBacks is the change that stops counting the attempts a stopping
// worker handed back (rollout.ErrTypeWorkerStopped) toward MaxAttempts and
// runs them again without a backoff: histories recorded before it replay
// them as any failed attempt.
const freeHandBacks = "free-hand-backs"

// maxHandBacks bounds the hand-backs of one rollout that cost no attempt,
// so that a fleet restarting over and over still ends the rollout.
const maxHandBacks = 10

// engineWaits is the change that waits out a container engine that could
// not be reached (rollout.ErrTypeEngine), minutes at a time and without
// counting the attempts toward MaxAttempts: histories recorded before it
// replay them as any failed attempt.
const engineWaits = "engine-waits"

// maxEngineWait bounds how long one rollout waits for an engine that is
// gone before its attempts count again.
const maxEngineWait = 30 * time.Minute

// activitySummary names the rollout an activity belongs to, for the
// timeline and pending activities of the Temporal UI. It holds no secret:
// the key, task index and epoch are the run's own coordinates.
func activitySummary(ref rollout.Ref) string {
	s := fmt.Sprintf("rollout %s · task %d · epoch %d", ref.Key(), ref.Index, ref.Epoch)
	if ref.Attempt > 1 {
		s += fmt.Sprintf(" · attempt %d", ref.Attempt)
	}
	return s
}

// run runs one rollout to a Summary, retrying infrastructure failures (a
// lost worker, a tunnel, an upstream outage) up to the run's MaxAttempts by
// re-acquiring a slot, possibly on another worker. A returned error is fatal
// to the run: the configuration cannot work.
func (w *window) run(ctx workflow.Context, ref rollout.Ref) (rollout.Summary, error) {
	lim := w.lim
	handBacks := 0                                  // attempts handed back by stopping workers, not counted
	engineDown, engineWaited := 0, time.Duration(0) // attempts that met no engine, and the time waited for it
	for attempt := 1; ; attempt++ {
		ref.Attempt = attempt
		var s rollout.Summary
		var err error
		if workflow.GetVersion(ctx, heldSlots, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			s, err = rolloutAttempt(ctx, ref, lim)
		} else {
			s, err = w.heldAttempt(ctx, ref)
		}
		if err == nil {
			return s, nil
		}
		if isType(err, rollout.ErrTypeConfig) {
			return rollout.Summary{}, err
		}
		// A stopping worker handed the rollout back: it did not fail, and
		// runs again at once on another worker.
		handedBack := isType(err, rollout.ErrTypeWorkerStopped) && handBacks < maxHandBacks &&
			workflow.GetVersion(ctx, freeHandBacks, workflow.DefaultVersion, 1) >= 1
		if handedBack {
			handBacks++
		}
		// The container engine could not be reached: it is waited for, a
		// backoff of minutes, and the attempt is not counted.
		waitEngine := !handedBack && isType(err, rollout.ErrTypeEngine) && engineWaited < maxEngineWait &&
			workflow.GetVersion(ctx, engineWaits, workflow.DefaultVersion, 1) >= 1
		if waitEngine {
			engineDown++
		}
		if ctx.Err() != nil || attempt-handBacks-engineDown >= lim.MaxAttempts {
			kind := rollout.KindInfra
			if isType(err, rollout.ErrTypeVerifier) {
				kind = rollout.KindVerifier
			}
			return rollout.Summary{
				Key: ref.Key(), Index: ref.Index, K: ref.K,
				Status: rollout.StatusError, ErrorKind: kind,
				Error: shorten(err.Error(), 300),
			}, nil
		}
		workflow.GetLogger(ctx).Warn("rollout attempt failed; retrying", "key", ref.Key(), "attempt", attempt, "error", err)
		if handedBack {
			continue
		}
		delay := backoff(attempt)
		if waitEngine {
			delay = engineBackoff(engineDown)
			engineWaited += delay
		}
		if err := workflow.Sleep(ctx, delay); err != nil {
			return rollout.Summary{}, err
		}
	}
}

// heldAttempt is one attempt of a rollout: Acquire admits it on some
// worker and holds the slot; that worker's own queue then runs Expose (when
// the slot needs exposing) and Run. Nothing here waits on a timeout for a
// live worker: Acquire, heartbeating until Run starts, says when the
// holding worker died, and the attempt ends so that the rollout is acquired
// again elsewhere.
func (w *window) heldAttempt(ctx workflow.Context, ref rollout.Ref) (rollout.Summary, error) {
	lim := w.lim
	token, slots := w.slots.open(ctx)
	defer w.slots.close(token)
	acquireCtx, cancelAcquire := workflow.WithCancel(ctx)
	// A hold still open when the attempt ends (its steps failed before Run)
	// is cancelled, and the worker releases the slot.
	defer cancelAcquire()
	acquireCtx = acquireOptions(acquireCtx, lim)
	if w.labels {
		acquireCtx = withSummary(acquireCtx, activitySummary(ref))
	}
	acquire := workflow.ExecuteActivity(acquireCtx, rollout.ActivityAcquire,
		rollout.AcquireInput{Rollout: ref, Hold: token})

	var (
		acquired    bool // Acquire has ended
		acquireRes  rollout.AcquireResult
		acquireErr  error
		steps       workflow.Future // the host steps of the latest slot
		cancelSteps workflow.CancelFunc
		stepsDone   bool
		summary     rollout.Summary
		stepsErr    error
	)
	start := func(s rollout.Slot) {
		// A later slot means the Acquire was retried on another worker
		// after the first holder went silent: its steps are abandoned.
		if cancelSteps != nil {
			cancelSteps()
		}
		var stepsCtx workflow.Context
		stepsCtx, cancelSteps = workflow.WithCancel(ctx)
		f, settle := workflow.NewFuture(stepsCtx)
		steps = f
		workflow.Go(stepsCtx, func(ctx workflow.Context) {
			settle.Set(hostSteps(ctx, ref, s, lim, w.labels))
		})
	}
	for {
		switch {
		case stepsDone:
			return summary, stepsErr
		case acquired && acquireErr != nil:
			// The holding worker died (or Acquire kept failing) before the
			// rollout's Run started: whatever waits on its queue is moot.
			if cancelSteps != nil {
				cancelSteps()
			}
			return rollout.Summary{}, acquireErr
		case acquired && acquireRes.Done != nil:
			// Already in the run store (a resumed run): nothing to run.
			return *acquireRes.Done, nil
		case acquired && steps == nil:
			// Acquire ended without its signal reaching this attempt (a
			// worker that does not hold): its result names the slot.
			start(rollout.Slot{Key: ref.Key(), HostQueue: acquireRes.HostQueue, Server: acquireRes.Server})
		}
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(slots, func(c workflow.ReceiveChannel, _ bool) {
			var s rollout.Slot
			c.Receive(ctx, &s)
			if acquired {
				return // the Acquire that sent it has ended: its slot is running
			}
			start(s)
		})
		if !acquired {
			sel.AddFuture(acquire, func(f workflow.Future) {
				acquired = true
				acquireErr = f.Get(ctx, &acquireRes)
			})
		}
		if steps != nil {
			current := steps
			sel.AddFuture(current, func(f workflow.Future) {
				stepsDone = true
				stepsErr = f.Get(ctx, &summary)
			})
		}
		sel.Select(ctx)
	}
}

// hostSteps runs a held slot's Expose (when the slot needs one), Run and,
// for a task with a verifier, Verify on the holding worker's queue. Expose
// and Run wait as long as that worker takes to start them: its Acquire
// tells when it died.
func hostSteps(ctx workflow.Context, ref rollout.Ref, slot rollout.Slot, lim Limits, labels bool) (rollout.Summary, error) {
	host := workflow.WithTaskQueue(ctx, slot.HostQueue)
	label := func(ctx workflow.Context) workflow.Context {
		if labels {
			return withSummary(ctx, activitySummary(ref))
		}
		return ctx
	}
	baseURL := slot.BaseURL
	if baseURL == "" {
		exposeCtx := workflow.WithActivityOptions(host, workflow.ActivityOptions{
			StartToCloseTimeout: 2 * time.Minute,
			HeartbeatTimeout:    lim.HeartbeatTimeout,
			RetryPolicy:         exposeRetry,
		})
		var exp rollout.ExposeResult
		if err := workflow.ExecuteActivity(label(exposeCtx), rollout.ActivityExpose, rollout.ExposeInput{Key: ref.Key()}).Get(ctx, &exp); err != nil {
			return rollout.Summary{}, err
		}
		baseURL = exp.BaseURL
	}
	runCtx := workflow.WithActivityOptions(host, workflow.ActivityOptions{
		StartToCloseTimeout: ref.Harness.Timeout + 2*time.Minute,
		HeartbeatTimeout:    lim.HeartbeatTimeout,
		// The workflow retries the whole rollout, so that a dead worker's
		// rollout moves to a live one.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	in := rollout.RunInput{Rollout: ref, BaseURL: baseURL}
	verifies := workflow.GetVersion(ctx, verifyStep, workflow.DefaultVersion, 1) >= 1
	if verifies {
		in.VerifyWithin = lim.HostStartTimeout
	}
	var s rollout.Summary
	if err := workflow.ExecuteActivity(label(runCtx), rollout.ActivityRun, in).Get(ctx, &s); err != nil {
		return rollout.Summary{}, err
	}
	if !verifies || s.Verify == nil {
		return s, nil
	}
	return verify(label(host), ref, *s.Verify, lim)
}

// verify runs a rollout's Verify on the worker whose Run left the
// workspace. That worker kept the rollout's capacity for it, so a live
// worker starts it at once: the bounded schedule-to-start timeout and the
// heartbeat say only that the worker died, and the attempt fails so that
// the rollout runs again elsewhere.
func verify(host workflow.Context, ref rollout.Ref, plan rollout.VerifyPlan, lim Limits) (rollout.Summary, error) {
	ctx := workflow.WithActivityOptions(host, workflow.ActivityOptions{
		ScheduleToStartTimeout: lim.HostStartTimeout,
		StartToCloseTimeout:    plan.Timeout + 2*time.Minute,
		HeartbeatTimeout:       lim.HeartbeatTimeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:                workflow.GetActivityOptions(host).Summary,
	})
	var s rollout.Summary
	err := workflow.ExecuteActivity(ctx, rollout.ActivityVerify, rollout.VerifyInput{Rollout: ref}).Get(ctx, &s)
	return s, err
}

// exposeRetry retries tunnel creation, each retry visible in the UI.
var exposeRetry = &temporal.RetryPolicy{
	InitialInterval:        time.Second,
	BackoffCoefficient:     2,
	MaximumInterval:        30 * time.Second,
	MaximumAttempts:        6,
	NonRetryableErrorTypes: []string{rollout.ErrTypeSlotLost, rollout.ErrTypeConfig},
}

// acquireOptions are Acquire's: it waits for capacity on a worker as long
// as it takes, heartbeating meanwhile, so a dead worker is noticed by its
// heartbeat; anything else that keeps failing (a server that cannot start)
// ends the attempt, so the rollout is recorded failed in bounded time
// instead of hanging the run.
func acquireOptions(ctx workflow.Context, lim Limits) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: acquireWaitLimit,
		HeartbeatTimeout:    lim.HeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			MaximumAttempts:        acquireAttempts,
			NonRetryableErrorTypes: []string{rollout.ErrTypeConfig},
		},
	})
}

// rolloutAttempt is acquire → expose → run on the acquiring worker's own
// queue, each host step with a schedule-to-start timeout: how attempts ran
// before Acquire held its slot (heldSlots), kept for their histories.
func rolloutAttempt(ctx workflow.Context, ref rollout.Ref, lim Limits) (rollout.Summary, error) {
	acquireCtx := acquireOptions(ctx, lim)
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
		RetryPolicy:      exposeRetry,
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

// withSummary sets the summary of the activities ctx schedules, keeping
// their other options.
func withSummary(ctx workflow.Context, summary string) workflow.Context {
	opts := workflow.GetActivityOptions(ctx)
	opts.Summary = summary
	return workflow.WithActivityOptions(ctx, opts)
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

// engineBackoff is the wait before the n-th attempt after an engine that
// could not be reached: 30 s, then doubling up to 5 minutes.
func engineBackoff(n int) time.Duration {
	d := 30 * time.Second << min(n-1, 4)
	return min(d, 5*time.Minute)
}

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
