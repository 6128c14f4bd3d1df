package harness

import (
	"context"
	"errors"
	"fmt"

	"github.com/evalflow/evalflow/tasksets"
)

var (
	_ Runtime           = (*Auto)(nil)
	_ Verifier          = (*Auto)(nil)
	_ WorkspacePreparer = (*Auto)(nil)
)

// Auto is the default runtime: a task with an environment (a Dockerfile or
// a docker_image) runs in Sandboxes, the container runtime, when a
// container engine answered, else in Isolated (bwrap) when it is
// installed, else it is refused with the reason; every other rollout runs
// in Local.
type Auto struct {
	// Sandboxes is the container runtime, nil when no engine answered;
	// NoEngine says why.
	Sandboxes interface {
		Runtime
		Verifier
		WorkspacePreparer
	}
	NoEngine string
	// Isolated runs environment tasks when no engine answered; nil when
	// bwrap is not installed.
	Isolated *Bwrap
	Local    *Local
	// Options prepare host-side workspaces (Isolated's and Local's).
	Options PrepareOptions
}

// forTask is the runtime a task runs in, or an error saying why none can.
func (a *Auto) forTask(task tasksets.Task) (Runtime, error) {
	if !HasEnvironment(task) {
		return a.Local, nil
	}
	switch {
	case a.Sandboxes != nil:
		return a.Sandboxes, nil
	case a.Isolated != nil:
		return a.Isolated, nil
	}
	return nil, &ConfigError{Err: fmt.Errorf("task %s has an environment to run in, and no runtime here can give it one: %s, and bwrap is not installed (run scripts/engine.sh for Podman, install bubblewrap, or, for a task whose scripts use $EVALFLOW_WORKSPACE rather than /app, pass --runtime local to run it on this host as it is)", task.ID, a.NoEngine)}
}

// HasEnvironment reports whether a task brings a system of its own: an
// environment directory or a docker_image.
func HasEnvironment(task tasksets.Task) bool {
	return task.Environment != "" || dockerImage(task.Info) != ""
}

// PrepareWorkspace prepares the task's workspace in the runtime it runs in.
func (a *Auto) PrepareWorkspace(parent string, task tasksets.Task) (*Workspace, error) {
	rt, err := a.forTask(task)
	if err != nil {
		return nil, err
	}
	if p, ok := rt.(WorkspacePreparer); ok {
		return p.PrepareWorkspace(parent, task)
	}
	return PrepareWorkspace(parent, task, a.Options)
}

// Run runs spec in the runtime its task runs in.
func (a *Auto) Run(ctx context.Context, spec Spec) (Result, error) {
	rt, err := a.forTask(spec.Task)
	if err != nil {
		return Result{}, err
	}
	return rt.Run(ctx, spec)
}

// Verify runs the verifier where the harness ran: in its sandbox, else in
// the runtime of the workspace's kind.
func (a *Auto) Verify(ctx context.Context, spec VerifySpec) (VerifyResult, error) {
	ws := spec.Workspace
	if ws == nil {
		return VerifyResult{}, errors.New("verify: no workspace")
	}
	var v Verifier = a.Local
	switch {
	case ws.Sandbox() != nil && a.Sandboxes != nil:
		v = a.Sandboxes
	case ws.Dir == "" && a.Sandboxes != nil:
		// A sandbox workspace whose sandbox is gone: the container
		// runtime says so.
		v = a.Sandboxes
	case (ws.image != "" || ws.build != "") && a.Isolated != nil:
		v = a.Isolated
	}
	return v.Verify(ctx, spec)
}

// TaskPreparer is a runtime that can make a task's system ready ahead of
// its rollouts: the container runtime builds its image.
type TaskPreparer interface {
	Prepare(ctx context.Context, task tasksets.Task) error
}

// Prepare builds the image of a task that runs in a container; other
// tasks need nothing ahead.
func (a *Auto) Prepare(ctx context.Context, task tasksets.Task) error {
	rt, err := a.forTask(task)
	if err != nil {
		return err
	}
	if p, ok := rt.(TaskPreparer); ok {
		return p.Prepare(ctx, task)
	}
	return nil
}

// Choice says where tasks with an environment run, for the worker's start.
func (a *Auto) Choice() string {
	switch {
	case a.Sandboxes != nil:
		return "tasks with an environment run in containers of their own images; other tasks locally"
	case a.Isolated != nil:
		return "tasks with an environment run in bwrap (" + a.NoEngine + "); other tasks locally"
	}
	return "tasks with an environment are refused (" + a.NoEngine + ", and bwrap is not installed); other tasks run locally"
}
