// Package activities holds evalflow's Temporal activities: methods on structs
// that own their dependencies (interception pool, harness runtime, run store).
package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/rubrics"
	"github.com/evalflow/evalflow/trace"
)

// Activities runs rollout steps on one worker. Acquire runs on the shared
// task queue; Expose, Run and Release run on HostQueue, which only this
// worker polls, because they need the slot this worker holds.
type Activities struct {
	Pool     *interception.Pool
	Runtime  harness.Runtime
	Store    *results.Store
	Tasksets *TasksetCache
	// HostQueue is this worker's own task queue.
	HostQueue string
	// DefaultHarness is the command run when a run names none (the built-in agent).
	DefaultHarness []string
	// Capacity bounds the rollouts this worker holds at once, from Acquire to
	// the end of Run.
	Capacity *Capacity
	Logger   *slog.Logger
}

// DescribeTaskset opens a taskset and reports its size.
func (a *Activities) DescribeTaskset(ctx context.Context, in rollout.DescribeTasksetInput) (rollout.DescribeTasksetResult, error) {
	ts, err := a.Tasksets.Open(in.Taskset)
	if err != nil {
		return rollout.DescribeTasksetResult{}, configErr(err)
	}
	return rollout.DescribeTasksetResult{Len: ts.Len()}, nil
}

// Acquire waits for capacity on this worker and registers the rollout on an
// interception server. Retried Acquires of the same key are idempotent.
func (a *Activities) Acquire(ctx context.Context, in rollout.AcquireInput) (rollout.AcquireResult, error) {
	key := in.Rollout.Key()
	if s, ok, err := a.stored(ctx, in.Rollout); err != nil {
		return rollout.AcquireResult{}, err
	} else if ok {
		return rollout.AcquireResult{Done: &s}, nil
	}
	if err := a.Capacity.Take(ctx, key, func() { activity.RecordHeartbeat(ctx, "waiting for capacity") }); err != nil {
		return rollout.AcquireResult{}, err
	}
	slot, err := a.Pool.Acquire(ctx, interception.Rollout{Key: key, Model: in.Rollout.Model, Sampling: dialects.Sampling(in.Rollout.Sampling)})
	if err != nil {
		a.Capacity.Give(key)
		return rollout.AcquireResult{}, fmt.Errorf("acquire slot: %w", err)
	}
	return rollout.AcquireResult{HostQueue: a.HostQueue, Server: slot.Server}, nil
}

// Expose makes the slot's interception server reachable and returns its URL.
// Tunnel failures are retryable TunnelErrors, visible as retries in the UI.
func (a *Activities) Expose(ctx context.Context, in rollout.ExposeInput) (rollout.ExposeResult, error) {
	if _, ok := a.Pool.Slot(in.Key); !ok {
		return rollout.ExposeResult{}, temporal.NewNonRetryableApplicationError("slot "+in.Key+" is not held by this worker", rollout.ErrTypeSlotLost, nil)
	}
	stop := heartbeat(ctx)
	url, err := a.Pool.Expose(ctx, in.Key)
	stop()
	if err != nil {
		return rollout.ExposeResult{}, temporal.NewApplicationErrorWithCause("expose interception server", rollout.ErrTypeTunnel, err)
	}
	return rollout.ExposeResult{BaseURL: url}, nil
}

// Release frees a slot whose rollout will not run.
func (a *Activities) Release(ctx context.Context, in rollout.ReleaseInput) error {
	a.Pool.Release(in.Key)
	a.Capacity.Give(in.Key)
	return nil
}

// Finish writes a run's summary to the run store.
func (a *Activities) Finish(ctx context.Context, in rollout.FinishInput) error {
	return a.Store.WriteSummary(ctx, in.RunID, in.Summary)
}

// Run runs the harness for a held slot, scores its answer, stores the trace
// and returns a small summary. A rollout already in the store is not run
// again. The harness's own failures are results; infrastructure failures are
// errors the workflow retries.
func (a *Activities) Run(ctx context.Context, in rollout.RunInput) (rollout.Summary, error) {
	ref := in.Rollout
	key := ref.Key()
	a.Capacity.Running(key)
	defer a.Capacity.Give(key)
	if s, ok, err := a.stored(ctx, ref); err != nil {
		return rollout.Summary{}, err
	} else if ok {
		a.Pool.Release(key)
		return s, nil
	}
	slot, ok := a.Pool.Slot(key)
	if !ok {
		return rollout.Summary{}, temporal.NewNonRetryableApplicationError("slot "+key+" is not held by this worker", rollout.ErrTypeSlotLost, nil)
	}
	defer a.Pool.Release(key) // however the rollout ends

	ts, err := a.Tasksets.Open(ref.Taskset)
	if err != nil {
		return rollout.Summary{}, configErr(err)
	}
	task, err := ts.Task(ctx, ref.Index)
	if err != nil {
		return rollout.Summary{}, taskErr(ctx, ref.Taskset, ref.Index, err)
	}
	rubric, err := rubrics.Parse(ref.Rubric)
	if err != nil {
		return rollout.Summary{}, configErr(err)
	}
	command := ref.Harness.Command
	if len(command) == 0 {
		command = a.DefaultHarness
		if d := ref.Harness.Dialect; d != "" {
			command = append(slices.Clip(command), "--dialect", d)
		}
	}

	started := time.Now()
	stop := heartbeat(ctx)
	res, err := a.Runtime.Run(ctx, harness.Spec{
		Key:      key,
		Command:  command,
		BaseURL:  in.BaseURL,
		Secret:   slot.Secret,
		Model:    ref.Model,
		Task:     task,
		MaxTurns: ref.Harness.MaxTurns,
		Timeout:  ref.Harness.Timeout,
	})
	stop()
	// A failed harness may have lost its way to the model: when the tunnel it
	// was given died, the failure is the tunnel's, retried, never a result.
	if err == nil && ctx.Err() == nil && (res.ExitCode != 0 || res.TimedOut) {
		if terr := a.Pool.CheckTunnel(ctx, key); terr != nil {
			return rollout.Summary{}, temporal.NewApplicationErrorWithCause("tunnel lost during the rollout", rollout.ErrTypeTunnel, terr)
		}
	}
	// The harness is done: its secret stops working, and the calls it was
	// answered are recorded before the turns are read.
	turns, _ := a.Pool.Finish(key)
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return rollout.Summary{}, configErr(fmt.Errorf("harness command %q not found", command[0]))
	case ctx.Err() != nil:
		return rollout.Summary{}, ctx.Err()
	case err != nil:
		return rollout.Summary{}, temporal.NewApplicationErrorWithCause("harness runtime", rollout.ErrTypeRuntime, err)
	}
	if upstreamFailed(res, turns) {
		return rollout.Summary{}, temporal.NewApplicationError(fmt.Sprintf("the model provider kept failing (last status %d)", turns[len(turns)-1].Status), rollout.ErrTypeUpstream)
	}

	answer := res.Answer
	if answer == "" && len(turns) > 0 {
		answer = turns[len(turns)-1].Response.Message.Text()
	}
	score := rubric.Score(task, answer)
	rec := results.Record{
		Key: key, RunID: ref.RunID, Epoch: ref.Epoch, Index: ref.Index, K: ref.K, TaskID: task.ID,
		Status: rollout.StatusOK, Reward: score.Reward, Turns: len(turns),
		DurationMS: res.Duration.Milliseconds(), Attempt: ref.Attempt, FinishedAt: time.Now().UTC(),
	}
	for _, t := range turns {
		rec.InputTokens += t.Response.Usage.InputTokens
		rec.OutputTokens += t.Response.Usage.OutputTokens
	}
	if kind, msg := classify(res, turns); kind != "" {
		rec.Status, rec.ErrorKind, rec.Error, rec.Reward = rollout.StatusError, kind, msg, 0
	}
	tr := &trace.Rollout{
		Key: key, TaskID: task.ID, Turns: turns, Reward: rec.Reward, Score: score.Detail,
		Harness: trace.Harness{
			ExitCode: res.ExitCode, TimedOut: res.TimedOut, Stdout: res.Stdout, Stderr: res.Stderr,
			Answer: res.Answer, Duration: res.Duration,
		},
		StartedAt: started.UTC(), EndedAt: time.Now().UTC(),
	}
	stored, _, err := a.Store.Put(ctx, rec, tr)
	if err != nil {
		return rollout.Summary{}, fmt.Errorf("write run store: %w", err)
	}
	return summaryOf(stored), nil
}

// stored returns the rollout's stored summary when the run store holds a
// result to reuse: any result, or only a success when the rollout reruns
// failures.
func (a *Activities) stored(ctx context.Context, ref rollout.Ref) (rollout.Summary, bool, error) {
	rec, ok, err := a.Store.Get(ctx, ref.RunID, ref.Key())
	if err != nil {
		return rollout.Summary{}, false, fmt.Errorf("read run store: %w", err)
	}
	if !ok || (ref.RetryFailed && rec.Status != rollout.StatusOK) {
		return rollout.Summary{}, false, nil
	}
	s := summaryOf(rec)
	s.Reused = true
	return s, true, nil
}

// classify names why a rollout failed as a task, or returns "".
func classify(res harness.Result, turns []trace.Turn) (kind, msg string) {
	for _, t := range turns {
		if t.Status == 400 && isContextLength(t.Error) {
			return rollout.KindContextLength, shortErr(t.Error)
		}
	}
	switch {
	case res.TimedOut:
		return rollout.KindTimeout, "harness timed out"
	case res.ExitCode == 2:
		return rollout.KindMaxTurns, "harness reached its turn limit"
	case res.ExitCode != 0:
		return rollout.KindHarnessExit, fmt.Sprintf("harness exited with code %d: %s", res.ExitCode, shortErr(lastLine(res.Stderr)))
	}
	if len(turns) > 0 && turns[len(turns)-1].Response.Message.Refusal != "" {
		return rollout.KindRefusal, shortErr(turns[len(turns)-1].Response.Message.Refusal)
	}
	return "", ""
}

// upstreamFailed tells an outage from a task failure: the harness failed and
// its last model call ended in a 429, a 5xx or a relay error.
func upstreamFailed(res harness.Result, turns []trace.Turn) bool {
	if res.ExitCode == 0 || len(turns) == 0 {
		return false
	}
	s := turns[len(turns)-1].Status
	return s == 429 || s >= 500
}

func isContextLength(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "context_length") || strings.Contains(m, "context length") ||
		strings.Contains(m, "maximum context") || strings.Contains(m, "prompt is too long") ||
		strings.Contains(m, "context window") || strings.Contains(m, "input is too long")
}

func summaryOf(r results.Record) rollout.Summary {
	return rollout.Summary{
		Key: r.Key, Index: r.Index, K: r.K, Reward: r.Reward, Status: r.Status,
		ErrorKind: r.ErrorKind, Error: r.Error, Turns: r.Turns,
		InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, DurationMS: r.DurationMS,
		Trace: r.Trace,
	}
}

// heartbeat records heartbeats until stop is called, so a dead worker's
// rollout is noticed within the heartbeat timeout.
func heartbeat(ctx context.Context) (stop func()) {
	every := activity.GetInfo(ctx).HeartbeatTimeout / 4
	if every <= 0 {
		return func() {}
	}
	every = max(every, 200*time.Millisecond)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx, "harness running")
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// taskErr classifies a failed task read: a cancelled activity (a stopping
// worker) is retried elsewhere; anything else is the taskset's fault.
func taskErr(ctx context.Context, taskset string, index int64, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return configErr(fmt.Errorf("task %d of %q: %w", index, taskset, err))
}

func configErr(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), rollout.ErrTypeConfig, nil)
}

func shortErr(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
