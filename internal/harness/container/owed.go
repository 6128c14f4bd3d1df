package container

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/evalflow/evalflow/internal/engine"
)

// owed are the containers this runtime could not remove because the
// engine could not be reached: removed as soon as it answers again, so an
// engine outage leaves no sandbox behind once it ends.
type owed struct {
	mu  sync.Mutex
	ids []string
}

// removeBox removes b's container; one the engine could not be reached
// to remove is owed, and removed at the runtime's next call that finds
// the engine back (settle).
func (r *Runtime) removeBox(ctx context.Context, b *box) error {
	err := b.remove(ctx, r.Engine)
	var down *engine.UnavailableError
	if errors.As(err, &down) && b.id != "" {
		r.owed.mu.Lock()
		if !slices.Contains(r.owed.ids, b.id) {
			r.owed.ids = append(r.owed.ids, b.id)
		}
		r.owed.mu.Unlock()
	}
	return err
}

// settle removes the containers owed since the engine went away, and
// says how many are still owed: those it still cannot reach. A container
// the engine no longer has (its keeper's lifetime ended it) is settled.
func (r *Runtime) settle(ctx context.Context) int {
	r.owed.mu.Lock()
	ids := r.owed.ids
	r.owed.ids = nil
	r.owed.mu.Unlock()
	var left []string
	for _, id := range ids {
		if err := r.Engine.RemoveContainer(ctx, id); err != nil && !engine.IsNotFound(err) {
			left = append(left, id)
		}
	}
	if len(ids) > len(left) {
		r.logger().Info("removed the sandboxes an engine outage had left", "count", len(ids)-len(left))
	}
	r.owed.mu.Lock()
	r.owed.ids = append(r.owed.ids, left...)
	n := len(r.owed.ids)
	r.owed.mu.Unlock()
	return n
}
