package workflows

import (
	"github.com/evalflow/evalflow/rollout"
	"go.temporal.io/sdk/workflow"
)

// window runs rollouts with at most max in flight: the sliding window every
// run type shares.
type window struct {
	max     int
	lim     Limits
	running int
	slots   *slotRouter
	// labels: activities carry a summary naming their rollout and the run
	// keeps live figures in its memo (uiMetadata).
	labels bool
}

// newWindow returns a window of at most max rollouts in flight.
func newWindow(ctx workflow.Context, max int, lim Limits) *window {
	labels := workflow.GetVersion(ctx, uiMetadata, workflow.DefaultVersion, 1) >= 1
	return &window{max: max, lim: lim, slots: newSlotRouter(ctx), labels: labels}
}

// pending is a rollout to start and the task position it belongs to.
type pending struct {
	position int64
	ref      rollout.Ref
}

type outcome struct {
	position int64
	summary  rollout.Summary
	err      error
}

// drive starts rollouts from next while there is room and next offers one,
// hands each finished rollout to done, and returns once none is running.
// A fatal error (the run cannot work as configured) stops new starts; the
// first one is returned after the in-flight rollouts drain.
func (w *window) drive(ctx workflow.Context, next func() (pending, bool), done func(position int64, s rollout.Summary)) error {
	ch := workflow.NewChannel(ctx)
	var fatal error
	for {
		for fatal == nil && w.running < w.max {
			p, ok := next()
			if !ok {
				break
			}
			w.running++
			workflow.Go(ctx, func(ctx workflow.Context) {
				s, err := w.run(ctx, p.ref)
				ch.Send(ctx, outcome{position: p.position, summary: s, err: err})
			})
		}
		if w.running == 0 {
			return fatal
		}
		var o outcome
		ch.Receive(ctx, &o)
		w.running--
		if o.err != nil {
			if fatal == nil {
				fatal = o.err
				workflow.GetLogger(ctx).Error("run cannot continue; draining in-flight rollouts", "error", o.err)
			}
			continue
		}
		done(o.position, o.summary)
	}
}
