package container

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/engine"
	"github.com/evalflow/evalflow/internal/harness/container/keeper"
	"github.com/evalflow/evalflow/tasksets"
)

// lifetimeMargin is added to an attempt's timeouts for a sandbox's hard
// lifetime; a sandbox of a harness without a timeout lives at most
// maxLifetime.
const (
	lifetimeMargin = 15 * time.Minute
	maxLifetime    = 24 * time.Hour
)

// Sockets in RunDir: the agent's way out, the keeper's exec socket, and
// the keeper's word that it listens.
const (
	interceptionSocket = "interception.sock"
	execSocket         = "exec.sock"
	readySocket        = "ready.sock"
)

// maxSocketPath is the longest unix socket path that binds everywhere
// (sun_path holds 108 bytes on Linux, 104 on others).
const maxSocketPath = 100

// sandbox is one rollout attempt's container, where the agent works.
type sandbox struct {
	r *Runtime
	box
	spec    harness.Spec
	workdir string // the image's WORKDIR: the workspace
	ws      *harness.Workspace
	forward net.Listener // the interception socket: the agent's one way to the worker
	service *service     // the image's ENTRYPOINT and CMD, when it has them
	group   *group       // a multi-container task's services and network (services.go)

	stopOnce sync.Once
	stopErr  error
}

// box is a container of an attempt kept by a keeper: the agent's sandbox,
// or the verifier's beside it.
type box struct {
	id     string
	runDir string // host side of RunDir
	// ownRunDir is set when runDir is a temporary directory of its own,
	// outside the workspace, removed with the box.
	ownRunDir bool
}

// newBox makes a box's run directory, root/name or, when a unix socket's
// path there would be too long, a temporary directory of its own.
func newBox(root, name string) (box, error) {
	b := box{runDir: filepath.Join(root, name)}
	if len(b.runDir)+len("/"+interceptionSocket) > maxSocketPath {
		dir, err := os.MkdirTemp("", "evalflow-run-")
		if err != nil {
			return box{}, err
		}
		b.runDir, b.ownRunDir = dir, true
	}
	// The image's user may not be root: the run files are everyone's.
	if err := os.MkdirAll(b.runDir, 0o777); err != nil {
		return box{}, err
	}
	_ = os.Chmod(b.runDir, 0o777)
	return b, nil
}

// launch creates and starts the box's container from cfg, its entrypoint
// the keeper (keep are the keeper's arguments beyond its exec and ready
// sockets and its lifetime), and waits until the keeper serves.
func (r *Runtime) launch(ctx context.Context, b *box, cfg engine.ContainerConfig, lifetime time.Duration, keep ...string) error {
	return r.launchWith(ctx, b, cfg, lifetime, nil, keep...)
}

// launchWith is launch with created called between the container's
// creation and its start (nil: nothing).
func (r *Runtime) launchWith(ctx context.Context, b *box, cfg engine.ContainerConfig, lifetime time.Duration, created func(id string) error, keep ...string) error {
	ready, err := net.Listen("unix", filepath.Join(b.runDir, readySocket))
	if err != nil {
		return fmt.Errorf("sandbox keeper: %w", err)
	}
	defer ready.Close()
	cfg.Entrypoint = []string{AgentPath, keeper.Command}
	cfg.Cmd = append([]string{"keep", "--lifetime", lifetime.String(), "--exec", RunDir + "/" + execSocket, "--ready", RunDir + "/" + readySocket}, keep...)
	cfg.HostConfig.Binds = append([]string{r.Agent + ":" + AgentPath + ":ro", b.runDir + ":" + RunDir}, cfg.HostConfig.Binds...)
	// The keeper ends at the hard lifetime, and the engine removes the
	// container then, whether or not its worker still runs.
	cfg.HostConfig.AutoRemove = true
	if b.id, err = r.Engine.CreateContainer(ctx, cfg); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	if created != nil {
		if err := created(b.id); err != nil {
			return err
		}
	}
	if err := r.Engine.StartContainer(ctx, b.id); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if err := awaitReady(ctx, ready); err != nil {
		return fmt.Errorf("its keeper did not start: %w", err)
	}
	return nil
}

// remove removes the box's container and its run directory.
func (b *box) remove(ctx context.Context, eng *engine.Client) error {
	var err error
	if b.id != "" {
		err = eng.RemoveContainer(ctx, b.id)
	}
	if b.ownRunDir {
		_ = os.RemoveAll(b.runDir)
	}
	return err
}

// start creates and starts the sandbox of a rollout attempt: a network
// namespace of its own (the engine's bridge, fenced, for a task that
// allows the internet; none at all otherwise), and the keeper carrying the
// agent's connections to the interception over a unix socket served here.
func (r *Runtime) start(ctx context.Context, spec harness.Spec, ws *harness.Workspace, image string, env harness.Environment) (sb *sandbox, err error) {
	return r.startOn(ctx, spec, ws, image, env, nil)
}

// startOn is start, the sandbox joining a multi-container rollout's
// network as j says (nil: a network namespace of its own).
func (r *Runtime) startOn(ctx context.Context, spec harness.Spec, ws *harness.Workspace, image string, env harness.Environment, j *joining) (sb *sandbox, err error) {
	r.settle(ctx) // what an engine outage left, now that the engine answers again
	img, err := r.Engine.InspectImage(ctx, image)
	if err != nil {
		return nil, fmt.Errorf("inspect image %s: %w", image, err)
	}
	workdir := img.Config.WorkingDir
	if workdir == "" || workdir == "/" {
		workdir = DefaultWorkdir
	}
	target, err := harness.LoopbackAddr(spec.BaseURL)
	if err != nil {
		return nil, err
	}
	sb = &sandbox{r: r, spec: spec, workdir: workdir, ws: ws, group: j.groupOf()}
	if sb.box, err = newBox(ws.Root(), "run"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = sb.Stop(context.Background())
		}
	}()
	// Only the agent's logs are the agent's to write: /logs/verifier is
	// the verifier's, in a container of its own. /logs/artifacts is both
	// theirs, on the host, where the attempt's trace collects it.
	agentLogs := filepath.Join(ws.Logs, harness.AgentLogs)
	artifacts := filepath.Join(ws.Logs, harness.ArtifactLogs)
	for _, d := range []string{ws.Logs, agentLogs, artifacts} {
		if err := os.MkdirAll(d, 0o777); err != nil {
			return nil, err
		}
		_ = os.Chmod(d, 0o777)
	}
	if err := harness.WriteTaskFile(sb.runDir, spec.Task); err != nil {
		return nil, err
	}
	binds := []string{agentLogs + ":" + LogsDir + "/" + harness.AgentLogs, artifacts + ":" + harness.ArtifactsDir}
	if spec.Solution != "" {
		// The oracle's: the solution of this step, and of every step after
		// it of a multi-step task, each in its own directory.
		binds = append(binds, spec.Solution+":"+SolutionDir+":ro")
		for _, s := range spec.Task.Steps {
			if s.Solution != "" {
				binds = append(binds, s.Solution+":"+stepSolution(s.Name)+":ro")
			}
		}
	}
	for _, m := range spec.Mounts {
		b := m.Path + ":" + m.Path
		if m.ReadOnly {
			b += ":ro"
		}
		binds = append(binds, b)
	}
	if sb.forward, err = net.Listen("unix", filepath.Join(sb.runDir, interceptionSocket)); err != nil {
		return nil, fmt.Errorf("sandbox forwarder: %w", err)
	}
	go keeper.Forward(sb.forward, func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", target)
	})
	hc, err := r.hostConfig(ctx, env, binds)
	if err != nil {
		return nil, err
	}
	cfg := engine.ContainerConfig{Image: image, WorkingDir: workdir, Labels: r.labels(spec, kindRollout), HostConfig: hc}
	j.apply(&cfg, &img)
	if err := r.launch(ctx, &sb.box, cfg, r.lifetime(spec), "--listen", target, "--socket", RunDir+"/"+interceptionSocket); err != nil {
		return nil, fmt.Errorf("the sandbox of %s: %w", spec.Key, err)
	}
	if err := j.fence(ctx, r, sb.id, env); err != nil {
		return nil, fmt.Errorf("the sandbox of %s: %w", spec.Key, err)
	}
	sb.startService(img)
	return sb, nil
}

// hostConfig is how a sandbox of a task's environment sits on the host:
// its binds, a network namespace of its own (none at all, or the
// internet's network when the task allows it), its limits.
func (r *Runtime) hostConfig(ctx context.Context, env harness.Environment, binds []string) (engine.HostConfig, error) {
	hc := engine.HostConfig{Binds: binds, NetworkMode: "none", Init: true}
	if env.Internet() {
		var err error
		if hc.NetworkMode, err = r.internetNetwork(ctx); err != nil {
			return hc, err
		}
	}
	if env.MemoryMB > 0 {
		hc.Memory = env.MemoryMB << 20
		hc.MemorySwap = hc.Memory
	}
	if env.CPUs > 0 {
		hc.NanoCPUs = int64(cpus(env.CPUs) * 1e9)
	}
	return hc, nil
}

// fence writes the firewall into the network namespace of the started
// container id, when env lets it reach the internet (firewall.go). Not
// being able to is a configuration error of this worker.
func (r *Runtime) fence(ctx context.Context, id string, env harness.Environment) error {
	if !env.Internet() {
		return nil
	}
	ct, err := r.Engine.InspectContainer(ctx, id)
	if err != nil {
		return err
	}
	if err := confine(ctx, ct.State.Pid); err != nil {
		return &harness.ConfigError{Err: err}
	}
	return nil
}

// awaitReady waits for the keeper's one connection saying it listens.
func awaitReady(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	go func() { <-ctx.Done(); ln.Close() }()
	c, err := ln.Accept()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	return c.Close()
}

// lifetime is the hard lifetime of an attempt's sandbox. A multi-step
// task's sandbox serves every step: each later step's agent and verifier
// add their limits (at least the first step's).
func (r *Runtime) lifetime(spec harness.Spec) time.Duration {
	d := maxLifetime
	if spec.Timeout > 0 {
		d = spec.Timeout + spec.Task.VerifierTimeout + lifetimeMargin
		for i, s := range spec.Task.Steps {
			if i > 0 {
				d += max(s.AgentTimeout, spec.Timeout) + max(s.VerifierTimeout, spec.Task.VerifierTimeout)
			}
		}
	}
	if r.MaxLifetime > 0 && r.MaxLifetime < d {
		d = r.MaxLifetime
	}
	return d
}

// command is the harness command as the sandbox runs it: the built-in
// agent's host path becomes its mounted copy.
func (sb *sandbox) command(argv []string) []string {
	if len(argv) > 0 && argv[0] == sb.r.Agent {
		return append([]string{AgentPath}, argv[1:]...)
	}
	return argv
}

// runHarness executes the harness in the sandbox.
func (sb *sandbox) runHarness(ctx context.Context, spec harness.Spec, env harness.Environment) (harness.Result, error) {
	paths := harness.Paths{Workdir: sb.workdir, Files: RunDir, Workspace: sb.workdir, Logs: LogsDir}
	if spec.Solution != "" {
		paths.Solution = SolutionDir
		for _, s := range spec.Task.Steps {
			if s.Solution == spec.Solution {
				paths.Solution = stepSolution(s.Name)
			}
		}
	}
	res, err := sb.exec(ctx, keeper.Request{
		Argv: sb.command(spec.Command), Env: harness.Env(nil, spec, paths), Dir: sb.workdir,
	}, spec.Timeout, spec.OutputLimit)
	if err != nil {
		return res, err
	}
	res.Answer = harness.ReadAnswer(filepath.Join(sb.runDir, harness.AnswerFile))
	if env.MemoryMB > 0 && res.ExitCode == 128+9 {
		res.OOMKilled = sb.oomKilled(ctx)
	}
	return res, nil
}

// exec executes req in the sandbox, through its keeper, within timeout
// (0: none). A command that times out, or whose ctx ends, is killed with
// its process group, and the sandbox with it.
func (sb *sandbox) exec(ctx context.Context, req keeper.Request, timeout time.Duration, limit int) (harness.Result, error) {
	return sb.box.exec(ctx, req, timeout, limit, func() { _ = sb.Stop(context.Background()) })
}

// exec executes req in the box through its keeper within timeout (0:
// none); stop ends the box when the command timed out or ctx ended.
func (b *box) exec(ctx context.Context, req keeper.Request, timeout time.Duration, limit int, stop func()) (harness.Result, error) {
	stdout, stderr := harness.NewTail(limit), harness.NewTail(limit)
	ectx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		ectx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	start := time.Now()
	code, err := keeper.Exec(ectx, filepath.Join(b.runDir, execSocket), req, stdout, stderr)
	res := harness.Result{ExitCode: code, Duration: time.Since(start)}
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() != nil:
		stop()
		return res, ctx.Err()
	case ectx.Err() != nil:
		stop()
		res.TimedOut, res.ExitCode = true, -1
		return res, nil
	}
	return res, fmt.Errorf("exec in the sandbox: %w", err)
}

// oomKilled reports whether the kernel killed a process of the sandbox
// for its memory limit (the memory cgroup's oom_kill count, v1 or v2).
func (sb *sandbox) oomKilled(ctx context.Context) bool {
	var out strings.Builder
	code, err := keeper.Exec(ctx, filepath.Join(sb.runDir, execSocket), keeper.Request{Argv: []string{AgentPath, keeper.Command, "oom-kills"}}, &out, nil)
	if err != nil || code != 0 {
		return false
	}
	n, _ := strconv.Atoi(strings.TrimSpace(out.String()))
	return n > 0
}

// Stop removes the sandbox's container and closes its forwarder.
func (sb *sandbox) Stop(ctx context.Context) error {
	sb.stopOnce.Do(func() {
		sb.service.stop()
		sb.stopErr = errors.Join(sb.r.removeBox(ctx, &sb.box), sb.group.remove(ctx))
		if sb.forward != nil {
			sb.forward.Close()
		}
	})
	return sb.stopErr
}

// stepSolution is where the oracle finds a multi-step task's step's
// solution.
func stepSolution(step string) string { return SolutionDir + "-steps/" + step }

// nextStep readies the sandbox for the next step of a multi-step task:
// the task file says the step's task, and the last step's answer is gone.
func (sb *sandbox) nextStep(task tasksets.Task) error {
	if err := os.Remove(filepath.Join(sb.runDir, harness.AnswerFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return harness.WriteTaskFile(sb.runDir, task)
}
