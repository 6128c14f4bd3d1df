package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/rollout"
)

// refusal is a task that cannot run here as configured, whatever the
// agent does (harness.RefusedTask): its image does not build, its
// environment asks for what the runtime does not give. The rollout is
// recorded as rollout.KindConfig and the run goes on with its other
// tasks, where a ConfigError of the run's own would end it.
type refusal struct {
	err error   // the runtime's
	out outcome // how far the attempt went: the image's build output
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// refusedOr records the rollout as refused when err is a refusal, and
// returns err as it is otherwise.
func (a *Activities) refusedOr(ctx context.Context, j job, rerun bool, err error) (rollout.Summary, error) {
	var r *refusal
	if !errors.As(err, &r) {
		return rollout.Summary{}, err
	}
	out := r.out
	if out.started.IsZero() {
		out.started = time.Now()
	}
	if out.stopped.IsZero() {
		out.stopped = out.started
	}
	a.logger().Warn("a task cannot run as configured: its rollout is recorded as a configuration error and the run goes on",
		"task", j.task.ID, "key", j.key, "error", r.err)
	rec := record(j, out)
	rec.Status, rec.ErrorKind, rec.Error = rollout.StatusError, rollout.KindConfig, oneLine(r.err.Error(), refusalErrorLimit)
	tr := j.trace(out)
	stored, _, err := a.Store.Put(ctx, rec, &tr)
	if err != nil {
		return rollout.Summary{}, fmt.Errorf("write run store: %w", err)
	}
	s := summaryOf(stored)
	s.Rerun = rerun
	return s, nil
}

// refusalErrorLimit bounds a refused rollout's error in its record and
// summary; the trace keeps the whole of what the runtime said.
const refusalErrorLimit = 500

// oneLine is msg on one line within limit bytes: its first line, then
// its other lines joined by " | ", the middle cut out when it is longer,
// so that both what failed and the output's last lines (a build's, where
// the failing command's message is) are kept.
func oneLine(msg string, limit int) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(msg), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	s := strings.Join(lines, " | ")
	if len(s) <= limit {
		return s
	}
	const cut = " … "
	head := limit / 3
	tail := limit - head - len(cut)
	return strings.ToValidUTF8(s[:head]+cut+s[len(s)-tail:], "")
}

// refusedTask reports whether err is a task's own configuration error
// (harness.RefusedTask), which refuses the task rather than the run.
func refusedTask(err error) bool {
	_, ok := harness.RefusedTask(err)
	return ok
}
