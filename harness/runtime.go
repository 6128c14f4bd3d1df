// Package harness is the contract between evalflow and the programs that
// run agents (harnesses) and grade them (verifiers): a Runtime runs a
// Spec to a Result, a Verifier reads the reward of a task's tests, both in
// a task's Workspace; and the environment every harness sees (Env). The
// runtimes themselves (local, bwrap, netns, auto, the container runtime)
// are under internal/harness.
package harness

import (
	"context"
	"errors"
	"time"

	"github.com/evalflow/evalflow/tasksets"
)

// Spec is one harness run.
type Spec struct {
	// Key is the rollout's key, for logs and workdir names.
	Key string
	// Attempt is the attempt's number, for a sandbox's labels.
	Attempt int
	// Command is the harness command line, run through no shell: argv[0] and args.
	Command []string
	// BaseURL is the interception server root (no trailing slash) the harness
	// talks to; OPENAI_BASE_URL is BaseURL+"/v1".
	BaseURL string
	// Secret authenticates the rollout at the interception server. It is passed
	// only through the environment and never logged.
	Secret string
	Model  string
	Task   tasksets.Task
	// MaxTurns bounds the harness's model calls (EVALFLOW_MAX_TURNS); 0 is no bound.
	MaxTurns int
	// Env holds extra KEY=VALUE entries.
	Env []string
	// Timeout kills the harness process group when reached; 0 means none.
	Timeout time.Duration
	// OutputLimit bounds the stdout and stderr tails kept, in bytes each.
	OutputLimit int
	// Workspace is the prepared working tree the harness runs in, left in
	// place for the verifier; nil runs it in a fresh temporary workdir,
	// removed afterwards.
	Workspace *Workspace
	// Mounts are host directories a sandbox runtime binds at the same path
	// inside (a packaged harness's program and its session directory);
	// runtimes on this host's files see them as they are.
	Mounts []Mount
	// Solution is a host directory holding the task's reference solution,
	// given to the oracle: EVALFLOW_SOLUTION, and mounted read-only at
	// /solution in a sandbox. Empty for an agent.
	Solution string
}

// Mount is a host directory a sandbox sees at the same path.
type Mount struct {
	Path     string
	ReadOnly bool
}

// Result is how a harness run ended. A non-zero exit is a Result, not an error.
type Result struct {
	ExitCode int
	TimedOut bool
	// OOMKilled is set when the harness was killed for its sandbox's
	// memory limit (the task's memory_mb): the agent's failure.
	OOMKilled bool
	// Answer is what the harness wrote to EVALFLOW_ANSWER_FILE, if anything.
	Answer   string
	Stdout   string
	Stderr   string
	Duration time.Duration
	// SessionLogs are the harness's own logs and transcripts, kept with the
	// rollout's trace (a packaged harness's session files).
	SessionLogs []SessionLog
}

// SessionLog is one log or transcript file a harness left.
type SessionLog struct {
	// Name is the file's path relative to where the harness kept it.
	Name    string
	Content string
	// Truncated is set when only the start of the file was kept.
	Truncated bool
}

// ConfigError is a harness that cannot run as configured (a packaged
// harness that cannot be installed, a runtime it does not support): the
// run fails rather than retrying it. One with a Task is that task's own
// (its image does not build, its environment asks for what the runtime
// does not give): its rollouts are refused and the run goes on.
type ConfigError struct {
	Err error
	// Task is the ID of the task whose configuration it is; "" for the
	// run's or the worker's.
	Task string
}

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// TaskConfigError is a ConfigError of task's own.
func TaskConfigError(task string, err error) *ConfigError {
	return &ConfigError{Err: err, Task: task}
}

// RefusedTask is the ID of the task whose own configuration err is (a
// ConfigError with a Task, an UnsupportedError): a task that cannot run
// here, whatever the agent does, while the run's other tasks can.
func RefusedTask(err error) (string, bool) {
	var ce *ConfigError
	if errors.As(err, &ce) && ce.Task != "" {
		return ce.Task, true
	}
	var ue *UnsupportedError
	if errors.As(err, &ue) {
		return ue.Task, true
	}
	return "", false
}

// Runtime starts harness processes somewhere.
type Runtime interface {
	// Run runs the harness to completion. Errors are infrastructure failures
	// (could not start, workdir failure); the harness's own failure is a Result.
	Run(ctx context.Context, spec Spec) (Result, error)
}

// The abilities a runtime may have beyond Runtime, found by type
// assertion (through wrappers: a packaged harness's runtime wraps the
// worker's).

// WorkspacePreparer is a runtime that prepares its rollouts' workspaces
// itself, rather than from the Dockerfile's host-side subset.
type WorkspacePreparer interface {
	PrepareWorkspace(parent string, task tasksets.Task) (*Workspace, error)
}

// Wrapper is a runtime that runs its commands on another.
type Wrapper interface {
	Unwrap() Runtime
}

// PreparerOf is the WorkspacePreparer of rt, looking through wrappers.
func PreparerOf(rt Runtime) (WorkspacePreparer, bool) { return ability[WorkspacePreparer](rt) }

// TaskPreparer is a runtime that can make a task's system ready ahead of
// its rollouts: the container runtime builds its image.
type TaskPreparer interface {
	Prepare(ctx context.Context, task tasksets.Task) error
}

// TaskChecker is a runtime that cannot run every task: CheckTask returns a
// *ConfigError saying why it refuses task, nil when it can run it. A run's
// start checks its tasks with it, so that a task the runtime cannot honour
// stops the run, named, before any rollout is scored.
type TaskChecker interface {
	CheckTask(task tasksets.Task) error
}

// CheckerOf is the TaskChecker of rt, looking through wrappers.
func CheckerOf(rt Runtime) (TaskChecker, bool) { return ability[TaskChecker](rt) }

// ability is the first of rt and the runtimes it wraps that is a T.
func ability[T any](rt Runtime) (T, bool) {
	for rt != nil {
		if a, ok := rt.(T); ok {
			return a, true
		}
		w, ok := rt.(Wrapper)
		if !ok {
			break
		}
		rt = w.Unwrap()
	}
	var none T
	return none, false
}
