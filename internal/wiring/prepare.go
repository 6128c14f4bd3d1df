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
// context), so that a Dockerfile that does not build is named, with the
// build's last lines, before any rollout. Such a task is refused, not the
// run: its error is among refused, and its rollouts, as they run, are
// recorded as refused while the run goes on with the other tasks. err is
// what stops the run (the engine failing). progress is told of each task
// prepared (done of total); total is 0 when nothing needs preparing.
func (w *Worker) PrepareTasks(ctx context.Context, taskset string, progress func(done, total int)) (refused []error, err error) {
	p, ok := preparerOf(w.cfg.Runtime)
	if !ok {
		return nil, nil
	}
	ts, err := tasksets.Open(taskset)
	if err != nil {
		return nil, nil // the run reports it
	}
	n := ts.Len()
	if n < 0 || n > prepareLimit {
		return nil, nil
	}
	var todo []tasksets.Task
	for i := int64(0); i < n; i++ {
		t, err := ts.Task(ctx, i)
		if err != nil {
			return nil, nil // the run reports it
		}
		if harness.HasEnvironment(t) {
			todo = append(todo, t)
		}
	}
	for i, t := range todo {
		if err := p.Prepare(ctx, t); err != nil {
			if _, ok := harness.RefusedTask(err); ok {
				refused = append(refused, err)
			} else if errors.As(err, new(*harness.ConfigError)) {
				return refused, err
			} else {
				return refused, fmt.Errorf("prepare task %s: %w", t.ID, err)
			}
		}
		if progress != nil {
			progress(i+1, len(todo))
		}
	}
	return refused, nil
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
