package wiring

import (
	"context"
	"errors"
	"fmt"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/tasksets"
)

// prepareLimit is the most tasks a run's start looks through for images
// to build ahead; a larger taskset builds each image at first use.
const prepareLimit = 10000

// PrepareTasks makes the tasks of a taskset ready before a run fans out:
// the container runtime builds each task's image (once per build
// context), so that a Dockerfile that does not build stops the run with
// its task named, before any rollout. progress is told of each task
// prepared (done of total); total is 0 when nothing needs preparing.
func (w *Worker) PrepareTasks(ctx context.Context, taskset string, progress func(done, total int)) error {
	p, ok := preparerOf(w.cfg.Runtime)
	if !ok {
		return nil
	}
	ts, err := tasksets.Open(taskset)
	if err != nil {
		return nil // the run reports it
	}
	n := ts.Len()
	if n < 0 || n > prepareLimit {
		return nil
	}
	var todo []tasksets.Task
	for i := int64(0); i < n; i++ {
		t, err := ts.Task(ctx, i)
		if err != nil {
			return nil // the run reports it
		}
		if harness.HasEnvironment(t) {
			todo = append(todo, t)
		}
	}
	for i, t := range todo {
		if err := p.Prepare(ctx, t); err != nil {
			var ce *harness.ConfigError
			if errors.As(err, &ce) {
				return err
			}
			return fmt.Errorf("prepare task %s: %w", t.ID, err)
		}
		if progress != nil {
			progress(i+1, len(todo))
		}
	}
	return nil
}

// preparerOf is the TaskPreparer of rt, looking through wrappers.
func preparerOf(rt harness.Runtime) (harness.TaskPreparer, bool) {
	for rt != nil {
		if p, ok := rt.(harness.TaskPreparer); ok {
			return p, true
		}
		u, ok := rt.(harness.Wrapper)
		if !ok {
			return nil, false
		}
		rt = u.Unwrap()
	}
	return nil, false
}
