package activities

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/interception/sidecar"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/rubrics"
	"github.com/evalflow/evalflow/tasksets"
	"github.com/evalflow/evalflow/trace"
)

// Run runs the harness for a held slot, scores its answer, stores the record
// and trace, and returns a small summary. A rollout already in the store is
// not run again. The harness's own failures are results; infrastructure
// failures are errors the workflow retries, and the attempt's trace (the
// turns so far, the harness's output, the error) is kept in the store.
//
// A task with an environment runs in a workspace prepared from it. When the
// task has a verifier and the workflow runs Verify next (VerifyWithin), an
// agent that finished is not scored here: the workspace, the attempt and
// this worker's capacity wait for Verify, and the summary says so.
func (a *Activities) Run(ctx context.Context, in rollout.RunInput) (sum rollout.Summary, err error) {
	ref := in.Rollout
	key := ref.Key()
	l := a.lease(key)
	reg := l.start()
	// The model calls end with the harness: the registration goes then,
	// the rest with the lease, unless it is handed over to Verify.
	defer l.endRun()
	prior, found, err := a.storedRecord(ctx, ref)
	if err != nil {
		return rollout.Summary{}, err
	}
	if found && reusable(ref, prior) {
		return a.withTokens(ctx, ref, reused(prior))
	}
	if reg == nil {
		return rollout.Summary{}, slotLost(key)
	}
	a.Metrics.RolloutStarted()
	defer func() { a.Metrics.RolloutFinished(outcomeOf(sum, err)) }()

	j, err := a.resolve(ctx, ref)
	if err != nil {
		return rollout.Summary{}, err
	}
	ws, err := a.prepareWorkspace(j)
	if err != nil {
		return a.refusedOr(ctx, j, found, err)
	}
	l.keep(ws)
	if len(j.task.Steps) > 0 {
		s, err := a.runSteps(ctx, j, reg, in.BaseURL, ws, found)
		if err != nil {
			return a.refusedOr(ctx, j, found, err)
		}
		return s, nil
	}
	out := a.runHarness(ctx, j, reg, in.BaseURL, ws, false)
	if err := infraError(ctx, j, out); err != nil {
		if retryable(err) {
			a.keepAttempt(ctx, j, out, err)
		}
		return a.refusedOr(ctx, j, found, err)
	}
	if j.task.Verified() && in.VerifyWithin > 0 {
		if kind, _ := classify(out.res, out.turns, ref.Harness.MaxTurns); kind == "" {
			l.handOver(pendingVerify{job: j, out: out, rerun: found}, in.VerifyWithin)
			return rollout.Summary{
				Key: key, Index: ref.Index, K: ref.K, Status: rollout.StatusOK,
				Verify: &rollout.VerifyPlan{Timeout: j.verifierTimeout()},
			}, nil
		}
	}
	rec, tr, err := a.score(ctx, j, out, rubrics.Input{})
	if err != nil {
		if retryable(err) {
			a.keepScored(ctx, j, tr, err)
		}
		return rollout.Summary{}, err
	}
	stored, _, err := a.Store.Put(ctx, rec, tr)
	if err != nil {
		return rollout.Summary{}, fmt.Errorf("write run store: %w", err)
	}
	a.Metrics.Cost(rec.Model, rec.CostUSD)
	s := summaryOf(stored)
	s.Rerun = found // a stored failure, run again
	return a.withTokens(ctx, ref, s)
}

// prepareWorkspace prepares the workspace of a task that has an
// environment or a verifier, or returns nil. An environment the runtime
// cannot reproduce (a RUN line outside a container engine) refuses the
// task (a *refusal), since every attempt would meet it again; a
// ConfigError of the run's own fails the run; any other failure fails the
// attempt as the runtime's error.
func (a *Activities) prepareWorkspace(j job) (*harness.Workspace, error) {
	if j.task.Environment == "" && !j.task.Verified() {
		return nil, nil
	}
	var ws *harness.Workspace
	var err error
	if p, ok := harness.PreparerOf(a.Runtime); ok {
		// A runtime that prepares its own (a sandbox of the task's image).
		ws, err = p.PrepareWorkspace(a.WorkDir, j.task)
	} else {
		ws, err = harness.PrepareWorkspace(a.WorkDir, j.task, harness.PrepareOptions{SkipUnsupported: a.SkipUnsupported})
	}
	var unsupported *harness.UnsupportedError
	switch {
	case refusedTask(err):
		return nil, &refusal{err: err}
	case errors.As(err, &unsupported), errors.As(err, new(*harness.ConfigError)):
		return nil, configErr(err)
	case err != nil:
		return nil, runtimeErr("prepare the workspace of task "+j.task.ID, err)
	}
	return ws, nil
}

// removeWorkspace removes a rollout's workspace; a failure is logged.
func (a *Activities) removeWorkspace(key string, ws *harness.Workspace) {
	if err := ws.Remove(); err != nil {
		a.logger().Warn("could not remove a workspace", "key", key, "error", err)
	}
}

// outcomeOf is how a Run ended, as the metrics count it: the rollout's
// status and error kind; or, for an error, "retry" (an infrastructure error
// Temporal retries) or "error", with the error's type.
func outcomeOf(s rollout.Summary, err error) (status, kind string) {
	if err == nil {
		return s.Status, s.ErrorKind
	}
	status = rollout.StatusError
	if retryable(err) {
		status = "retry"
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return status, appErr.Type()
	}
	return status, "other"
}

// job is one rollout resolved: its task, how it is scored, what runs it.
type job struct {
	ref     rollout.Ref
	key     string
	task    tasksets.Task
	rubric  *rubrics.Program
	command []string
	// solution is the task's reference solution, given to the oracle only.
	solution string
}

// resolve reads the rollout's task from its taskset, its rubric and the
// harness command. What the run names but cannot be had is a ConfigError.
func (a *Activities) resolve(ctx context.Context, ref rollout.Ref) (job, error) {
	ts, err := a.Tasksets.Open(ref.Taskset)
	if err != nil {
		return job{}, openErr(err)
	}
	task, err := ts.Task(ctx, ref.Index)
	if err != nil {
		return job{}, taskErr(ctx, ref.Taskset, ref.Index, err)
	}
	// The run's start checked it too, on the worker that described the
	// taskset; this worker's runtime may be another.
	if c, ok := harness.CheckerOf(a.Runtime); ok {
		if err := c.CheckTask(task); err != nil {
			return job{}, configErr(err)
		}
	}
	rubric, err := rubrics.Compile(ref.Rubric)
	if err != nil {
		return job{}, configErr(err)
	}
	// The starter checks it too; a run started by another client is held
	// to the same rule before a harness sees it.
	if err := harness.CheckRunEnv(ref.Harness.Env); err != nil {
		return job{}, configErr(err)
	}
	command := ref.Harness.Command
	if len(command) == 0 {
		command = a.DefaultHarness
		if d := ref.Harness.Dialect; d != "" {
			command = append(slices.Clip(command), "--dialect", d)
		}
	}
	var solution string
	switch {
	case ref.Harness.Oracle:
		command, solution = harness.OracleCommand(), task.Solution
	case ref.Harness.Adversary != "":
		command = append(slices.Clip(a.DefaultHarness), "--adversary", ref.Harness.Adversary)
	}
	return job{ref: ref, key: ref.Key(), task: task, rubric: rubric, command: command, solution: solution}, nil
}

// outcome is how one run of the harness went.
type outcome struct {
	res harness.Result
	// err is the runtime's: the harness could not run.
	err error
	// tunnel is set when the tunnel the harness was given died under it.
	tunnel error
	// handedBack is set when the worker stopped the harness as it stopped.
	handedBack bool
	// turns are the model calls the interception server recorded.
	turns            []trace.Turn
	started, stopped time.Time
	// notes are what preparing the workspace could not reproduce.
	notes []string
	// side is what the task's tool servers and user left (side.go).
	side sidecar.Side
	// artifacts is where the attempt's artifacts are read (artifacts.go).
	artifacts artifactDir
}

// runHarness runs the harness against the registration's server,
// heartbeating, and collects what the interception server recorded. The
// rollout's secret is taken out of the harness's output.
// With more to come (the next step of a multi-step task), the rollout's
// calls go on: its turns so far are read, and the caller finishes them.
func (a *Activities) runHarness(ctx context.Context, j job, reg *interception.Registration, baseURL string, ws *harness.Workspace, more bool) outcome {
	out := outcome{started: time.Now()}
	if ws != nil {
		out.notes = ws.Notes
	}
	a.shareTask(j, reg)
	stop := heartbeat(ctx, "harness running")
	// A harness whose tunnel the pool finds dead is stopped at once: it has
	// lost its way to the model and would otherwise run until its timeout.
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	// A stopping worker lets the harness go on for its drain timeout,
	// then hands the rollout back.
	drainCtx, endDrain := a.untilStopped(ctx, a.DrainTimeout)
	defer endDrain()
	go func() {
		select {
		case <-drainCtx.Done():
			if stoppedBy(drainCtx) {
				stopRun(errWorkerStopped)
			}
		case <-runCtx.Done():
		}
	}()
	if lost := reg.Lost(); lost != nil {
		go func() {
			select {
			case <-lost:
				stopRun(errTunnelLost)
			case <-runCtx.Done():
			}
		}()
	}
	out.res, out.err = a.Runtime.Run(runCtx, harness.Spec{
		Key:      j.key,
		Attempt:  j.ref.Attempt,
		Command:  j.command,
		BaseURL:  baseURL,
		Secret:   reg.Secret,
		Model:    j.ref.Model,
		Task:     j.task,
		MaxTurns: j.ref.Harness.MaxTurns,
		// The run's own variables come after the SDK timeouts, so that a
		// run may set them.
		Env:     append(harness.SDKTimeoutEnv(a.SDKTimeout), j.ref.Harness.Env...),
		Timeout: j.ref.Harness.AgentTimeout(j.task.AgentTimeout),
		// The agent's workspace: the tests and the solution are not in it.
		Workspace: ws,
		Solution:  j.solution,
	})
	stopRun(errHarnessEnded) // a tunnel lost from now on did not stop the harness
	stop()
	// A failed harness may have lost its way to the model: when the tunnel it
	// was given died, the failure is the tunnel's, retried, never a result.
	switch {
	case ctx.Err() != nil:
	case errors.Is(context.Cause(runCtx), errWorkerStopped):
		out.handedBack = true
		a.logger().Warn("the worker stopped before the rollout ended; handed back", "key", j.key)
	case errors.Is(context.Cause(runCtx), errTunnelLost):
		if out.tunnel = reg.CheckTunnel(ctx); out.tunnel == nil {
			out.tunnel = errTunnelLost
		}
		a.logger().Warn("the rollout's tunnel died; its harness was stopped", "key", j.key, "error", out.tunnel)
	case out.err == nil && (out.res.ExitCode != 0 || out.res.TimedOut):
		out.tunnel = reg.CheckTunnel(ctx)
	}
	// The rollout's calls end (its secret stops working) once the calls
	// whose caller has its answer are recorded; the registration itself
	// is released when Run returns.
	if more {
		out.turns, _ = reg.Turns()
	} else {
		out.turns, _ = reg.Finish()
	}
	out.side = a.sideOf(reg)
	out.artifacts = artifactDir{ws: ws, secret: reg.Secret}
	out.stopped = time.Now()
	out.res = redacted(out.res, reg.Secret)
	return out
}

// errTunnelLost stops a harness whose tunnel the pool found dead;
// errHarnessEnded ends the watch for that once the harness has ended.
var (
	errTunnelLost   = errors.New("the tunnel was found dead while the harness ran")
	errHarnessEnded = errors.New("the harness ended")
)

// infraError is the error a run that failed for reasons of the
// infrastructure (not of the agent) ends with, or nil: a missing harness
// command fails the run; a task that cannot run as configured is a
// *refusal; a harness stopped by its stopping worker (handed
// back), a cancelled activity, a dead tunnel, a failing runtime or provider are retried. A provider failed the
// run when its last model call was failed by the provider (upstreamFailure):
// a connection cut mid-answer, a truncated stream or a provider that hung
// is an UpstreamUnavailable, never the agent's harness_exit, timeout or
// wrong answer.
func infraError(ctx context.Context, j job, out outcome) error {
	switch {
	case out.handedBack:
		return handedBack("the rollout")
	case out.tunnel != nil:
		return temporal.NewApplicationErrorWithCause("tunnel lost during the rollout", rollout.ErrTypeTunnel, out.tunnel)
	case errors.Is(out.err, exec.ErrNotFound):
		return configErr(fmt.Errorf("harness command %q not found", j.command[0]))
	case refusedTask(out.err):
		return &refusal{err: out.err, out: out}
	case errors.As(out.err, new(*harness.ConfigError)):
		return configErr(out.err)
	case ctx.Err() != nil:
		return ctx.Err()
	case out.err != nil:
		return runtimeErr("harness runtime", out.err)
	}
	if f := upstreamFailure(out.res, out.turns); f != "" {
		return temporal.NewApplicationError(fmt.Sprintf("the model provider kept failing (%s failure, last status %d)", f, out.turns[len(out.turns)-1].Status), rollout.ErrTypeUpstream)
	}
	return nil
}

// retryable reports whether the workflow tries the rollout again after err.
func retryable(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && !appErr.NonRetryable()
}

// keepAttempt stores the trace of an attempt that ends in a retried
// infrastructure error, so that what it saw is not lost with it. A store
// that cannot keep it is logged: the rollout is retried all the same.
func (a *Activities) keepAttempt(ctx context.Context, j job, out outcome, cause error) {
	a.keepTrace(ctx, j, j.trace(out), cause)
}

// keepTrace stores tr as the trace of an attempt that ends in cause.
func (a *Activities) keepTrace(ctx context.Context, j job, tr trace.Rollout, cause error) {
	at := results.Attempt{N: j.ref.Attempt, Error: shortErr(errorText(cause)), Rollout: tr}
	if _, err := a.Store.PutAttempt(ctx, j.ref.RunID, at); err != nil {
		a.logger().Warn("could not keep the trace of a failed attempt", "key", j.key, "attempt", j.ref.Attempt, "error", err)
	}
}

// errorText is an error with its causes, as one line.
func errorText(err error) string {
	s := err.Error()
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Unwrap() != nil {
		s += ": " + appErr.Unwrap().Error()
	}
	return s
}

// trace is the rollout's trace as far as out goes, with the artifacts
// its workspace holds now.
func (j job) trace(out outcome) trace.Rollout {
	tr := trace.Rollout{
		Key: j.key, TaskID: j.task.ID, Turns: out.turns,
		Harness: trace.Harness{
			ExitCode: out.res.ExitCode, TimedOut: out.res.TimedOut, Stdout: out.res.Stdout, Stderr: out.res.Stderr,
			Answer: out.res.Answer, Duration: out.res.Duration, SessionLogs: sessionLogs(out.res.SessionLogs),
		},
		Workspace: append(slices.Clip(out.notes), j.task.Warnings...), State: out.side.State, Users: out.side.Users,
		StartedAt: out.started.UTC(), EndedAt: out.stopped.UTC(),
	}
	out.artifacts.fill(&tr)
	return tr
}

// answeredBy is the model the provider named in its last response that named
// one, else the model the run asked for: a mock's numbers are never filed
// under a real model's name.
func answeredBy(turns []trace.Turn, asked string) string {
	for _, t := range slices.Backward(turns) {
		if t.Response.Model != "" {
			return t.Response.Model
		}
	}
	return asked
}

// redacted is res with the rollout's secret blanked out of what the harness
// printed: a harness may echo its environment, and its output tails are
// stored.
func redacted(res harness.Result, secret string) harness.Result {
	if secret == "" {
		return res
	}
	const blank = "[rollout secret]"
	res.Stdout = strings.ReplaceAll(res.Stdout, secret, blank)
	res.Stderr = strings.ReplaceAll(res.Stderr, secret, blank)
	res.Answer = strings.ReplaceAll(res.Answer, secret, blank)
	logs := make([]harness.SessionLog, len(res.SessionLogs))
	for i, l := range res.SessionLogs {
		l.Content = strings.ReplaceAll(l.Content, secret, blank)
		logs[i] = l
	}
	res.SessionLogs = logs
	return res
}

// sessionLogs are a harness's session logs as the trace keeps them.
func sessionLogs(logs []harness.SessionLog) []trace.SessionLog {
	var out []trace.SessionLog
	for _, l := range logs {
		out = append(out, trace.SessionLog{Name: l.Name, Content: l.Content, Truncated: l.Truncated})
	}
	return out
}
