package activities

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/rollout"
)

// errWorkerStopped is the cause of a context this worker ends because it
// stops: the rollout is handed back, not failed.
var errWorkerStopped = errors.New("the worker stopped")

// handedBack is the failure a step ends with when its worker stops before
// it is done: retryable, so that the rollout is retried at once on another
// worker instead of waiting for its heartbeat timeout, and never the
// agent's.
func handedBack(what string) error {
	return temporal.NewApplicationErrorWithCause("the worker stopped before "+what+" ended; handed back to run elsewhere",
		rollout.ErrTypeWorkerStopped, errWorkerStopped)
}

// HandBack makes the rollouts still draining on a's stopping worker end
// now, handed back, without waiting for DrainTimeout: a second stop signal.
// A function, not a method, so that it is not registered as an activity.
func HandBack(a *Activities) {
	a.drain.once.Do(a.drain.init)
	a.drain.closeOnce.Do(func() { close(a.drain.now) })
}

// drain is how a stopping worker ends what it runs (HandBack).
type drain struct {
	once      sync.Once
	closeOnce sync.Once
	now       chan struct{}
}

func (d *drain) init() { d.now = make(chan struct{}) }

// handBackNow is the channel HandBack closes.
func (a *Activities) handBackNow() <-chan struct{} {
	a.drain.once.Do(a.drain.init)
	return a.drain.now
}

// untilStopped returns ctx ended with errWorkerStopped when the activity's
// worker stops and then grace passes (or HandBack is called); end releases
// it. A grace of 0 ends it as soon as the worker stops.
func (a *Activities) untilStopped(ctx context.Context, grace time.Duration) (_ context.Context, end func()) {
	sctx, cancel := context.WithCancelCause(ctx)
	stopping := activity.GetWorkerStopChannel(ctx)
	now := a.handBackNow()
	go func() {
		select {
		case <-stopping:
		case <-sctx.Done():
			return
		}
		if grace > 0 {
			t := time.NewTimer(grace)
			defer t.Stop()
			select {
			case <-t.C:
			case <-now:
			case <-sctx.Done():
				return
			}
		}
		cancel(errWorkerStopped)
	}()
	return sctx, func() { cancel(nil) }
}

// stoppedBy reports whether ctx was ended because the worker stopped.
func stoppedBy(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errWorkerStopped)
}
