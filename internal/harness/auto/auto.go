// Package auto is the default runtime, which picks one per task: the
// container runtime for a task with an environment where an engine
// answers, else bwrap, else the local runtime for the tasks that need no
// system of their own.
package auto

import (
	"context"
	"fmt"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/tasksets"
)

var (
	_ harness.Runtime           = (*Runtime)(nil)
	_ harness.Verifier          = (*Runtime)(nil)
	_ harness.WorkspacePreparer = (*Runtime)(nil)
	_ harness.TaskPreparer      = (*Runtime)(nil)
	_ harness.TaskChecker       = (*Runtime)(nil)
)

// Runtime is the default runtime: a task with an environment (a
// Dockerfile or a docker_image) runs in Sandboxes, the container runtime,
// when a container engine answered, else in Isolated (bwrap) when it is
// installed, else it is refused with the reason; every other rollout runs
// in Local.
type Runtime struct {
	// Sandboxes is the container runtime, nil when no engine answered;
	// NoEngine says why.
	Sandboxes interface {
		harness.Runtime
		harness.Verifier
		harness.WorkspacePreparer
	}
	NoEngine string
	// Isolated runs environment tasks when no engine answered; nil when
	// bwrap is not installed.
	Isolated *local.Bwrap
	Local    *local.Runtime
	// Options prepare host-side workspaces (Isolated's and Local's).
	Options harness.PrepareOptions
}

// forTask is the runtime a task runs in, or an error saying why none can.
func (a *Runtime) forTask(task tasksets.Task) (harness.Runtime, error) {
	if !harness.HasEnvironment(task) {
		return a.Local, nil
	}
	switch {
	case a.Sandboxes != nil:
		return a.Sandboxes, nil
	case a.Isolated != nil:
		return a.Isolated, nil
	}
	return nil, &harness.ConfigError{Err: fmt.Errorf("task %s has an environment to run in, and no runtime here can give it one: %s, and bwrap is not installed (run scripts/engine.sh for Podman, install bubblewrap, or, for a task whose scripts use $EVALFLOW_WORKSPACE rather than /app, pass --runtime local to run it on this host as it is)", task.ID, a.NoEngine)}
}

// PrepareWorkspace prepares the task's workspace in the runtime it runs in.
func (a *Runtime) PrepareWorkspace(parent string, task tasksets.Task) (*harness.Workspace, error) {
	rt, err := a.forTask(task)
	if err != nil {
		return nil, err
	}
	if p, ok := rt.(harness.WorkspacePreparer); ok {
		return p.PrepareWorkspace(parent, task)
	}
	return harness.PrepareWorkspace(parent, task, a.Options)
}

// Run runs spec in the runtime its task runs in.
func (a *Runtime) Run(ctx context.Context, spec harness.Spec) (harness.Result, error) {
	rt, err := a.forTask(spec.Task)
	if err != nil {
		return harness.Result{}, err
	}
	return rt.Run(ctx, spec)
}

// Verify runs the verifier where the harness ran: in its sandbox, else in
// the runtime of the workspace's kind. A spec without a workspace goes to
// Local, which refuses it.
func (a *Runtime) Verify(ctx context.Context, spec harness.VerifySpec) (harness.VerifyResult, error) {
	var v harness.Verifier = a.Local
	switch ws := spec.Workspace; {
	case ws == nil:
	case ws.Sandbox() != nil && a.Sandboxes != nil:
		v = a.Sandboxes
	case ws.Dir == "" && a.Sandboxes != nil:
		// A sandbox workspace whose sandbox is gone: the container
		// runtime says so.
		v = a.Sandboxes
	case (ws.Image() != "" || ws.BuildContext() != "") && a.Isolated != nil:
		v = a.Isolated
	}
	return v.Verify(ctx, spec)
}

// Prepare builds the image of a task that runs in a container; other
// tasks need nothing ahead.
func (a *Runtime) Prepare(ctx context.Context, task tasksets.Task) error {
	rt, err := a.forTask(task)
	if err != nil {
		return err
	}
	if p, ok := rt.(harness.TaskPreparer); ok {
		return p.Prepare(ctx, task)
	}
	return nil
}

// Choice says where tasks with an environment run, for the worker's start.
func (a *Runtime) Choice() string {
	switch {
	case a.Sandboxes != nil:
		return "tasks with an environment run in containers of their own images; other tasks locally"
	case a.Isolated != nil:
		return "tasks with an environment run in bwrap (" + a.NoEngine + "); other tasks locally"
	}
	return "tasks with an environment are refused (" + a.NoEngine + ", and bwrap is not installed); other tasks run locally"
}

// CheckTask checks a task in the runtime it runs in: a task with an
// environment goes to a sandbox, which honours its paths; the others run
// locally.
func (a *Runtime) CheckTask(task tasksets.Task) error {
	rt, err := a.forTask(task)
	if err != nil {
		return err
	}
	if c, ok := rt.(harness.TaskChecker); ok {
		return c.CheckTask(task)
	}
	return nil
}
