package workflows

import (
	"strconv"

	"go.temporal.io/sdk/workflow"

	"github.com/evalflow/evalflow/rollout"
)

// slotRouter hands each slot signal (rollout.SignalSlot) to the rollout
// attempt waiting for it. Every attempt of a holding Acquire gets a token of
// its own, so that two attempts of one key (a group run twice) never take
// each other's slots, and a late signal for an attempt that has ended is
// dropped.
type slotRouter struct {
	next    int
	waiting map[string]workflow.Channel // by token; looked up, never iterated
}

// newSlotRouter starts the coroutine that routes slot signals. It issues no
// command, so histories recorded before holding Acquires replay unchanged.
func newSlotRouter(ctx workflow.Context) *slotRouter {
	r := &slotRouter{waiting: map[string]workflow.Channel{}}
	signals := workflow.GetSignalChannel(ctx, rollout.SignalSlot)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var s rollout.Slot
			if more := signals.Receive(ctx, &s); !more {
				return
			}
			if c, ok := r.waiting[s.Token]; ok {
				c.SendAsync(s)
			}
		}
	})
	return r
}

// open returns a new token and the channel its slot signals arrive on.
func (r *slotRouter) open(ctx workflow.Context) (string, workflow.ReceiveChannel) {
	r.next++
	token := strconv.Itoa(r.next)
	// A retried Acquire signals again from its new worker; a few signals
	// may wait here while the attempt handles one.
	c := workflow.NewBufferedChannel(ctx, 8)
	r.waiting[token] = c
	return token, c
}

// close stops routing token's signals.
func (r *slotRouter) close(token string) { delete(r.waiting, token) }
