package container

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/engine"
	"github.com/evalflow/evalflow/internal/harness/container/keeper"
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

// sandbox is one rollout attempt's container.
type sandbox struct {
	r       *Runtime
	id      string
	workdir string // the image's WORKDIR: the workspace
	runDir  string // host side of RunDir
	ws      *harness.Workspace
	forward net.Listener // the interception socket, for a sandbox without network
	// ownRunDir is set when runDir is a temporary directory of its own,
	// outside the workspace, removed on Stop.
	ownRunDir bool

	stopOnce sync.Once
	stopErr  error
}

// start creates and starts the sandbox of a rollout attempt.
func (r *Runtime) start(ctx context.Context, spec harness.Spec, ws *harness.Workspace, image string, env harness.Environment) (sb *sandbox, err error) {
	img, err := r.Engine.InspectImage(ctx, image)
	if err != nil {
		return nil, fmt.Errorf("inspect image %s: %w", image, err)
	}
	workdir := img.Config.WorkingDir
	if workdir == "" || workdir == "/" {
		workdir = DefaultWorkdir
	}
	sb = &sandbox{r: r, workdir: workdir, ws: ws, runDir: filepath.Join(ws.Root(), "run")}
	if len(sb.runDir)+len("/"+interceptionSocket) > maxSocketPath {
		// A unix socket's path is short: a deep workspace keeps its run
		// files in a directory of their own, removed with the sandbox.
		if sb.runDir, err = os.MkdirTemp("", "evalflow-run-"); err != nil {
			return nil, err
		}
		sb.ownRunDir = true
	}
	// The image's user may not be root: the logs and run files are
	// everyone's to write.
	for _, d := range []string{sb.runDir, ws.Logs, filepath.Join(ws.Logs, harness.AgentLogs), filepath.Join(ws.Logs, harness.VerifierLogs)} {
		if err := os.MkdirAll(d, 0o777); err != nil {
			return nil, err
		}
		_ = os.Chmod(d, 0o777)
	}
	if err := harness.WriteTaskFile(sb.runDir, spec.Task); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = sb.Stop(context.Background())
		}
	}()

	// The keeper says when it serves, on a socket of ours.
	ready, err := net.Listen("unix", filepath.Join(sb.runDir, readySocket))
	if err != nil {
		return nil, fmt.Errorf("sandbox keeper: %w", err)
	}
	defer ready.Close()
	cmd := []string{"keep", "--lifetime", lifetime(spec).String(), "--exec", RunDir + "/" + execSocket, "--ready", RunDir + "/" + readySocket}
	binds := []string{r.Agent + ":" + AgentPath + ":ro", sb.runDir + ":" + RunDir, ws.Logs + ":" + LogsDir}
	if spec.Solution != "" {
		binds = append(binds, spec.Solution+":"+SolutionDir+":ro")
	}
	for _, m := range spec.Mounts {
		b := m.Path + ":" + m.Path
		if m.ReadOnly {
			b += ":ro"
		}
		binds = append(binds, b)
	}
	network := "host"
	if !env.Internet() {
		// No network at all: the keeper carries the agent's connections
		// to the interception over a unix socket served here.
		network = "none"
		target, err := interceptionAddr(spec.BaseURL)
		if err != nil {
			return nil, err
		}
		if sb.forward, err = net.Listen("unix", filepath.Join(sb.runDir, interceptionSocket)); err != nil {
			return nil, fmt.Errorf("sandbox forwarder: %w", err)
		}
		go keeper.Forward(sb.forward, func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", target)
		})
		cmd = append(cmd, "--listen", target, "--socket", RunDir+"/"+interceptionSocket)
	}
	// The keeper ends at the hard lifetime, and the engine removes the
	// sandbox then, whether or not its worker still runs.
	hc := engine.HostConfig{Binds: binds, NetworkMode: network, Init: true, AutoRemove: true}
	if env.MemoryMB > 0 {
		hc.Memory = env.MemoryMB << 20
		hc.MemorySwap = hc.Memory
	}
	if env.CPUs > 0 {
		hc.NanoCPUs = int64(cpus(env.CPUs) * 1e9)
	}
	sb.id, err = r.Engine.CreateContainer(ctx, engine.ContainerConfig{
		Image: image, Entrypoint: []string{AgentPath, keeper.Command}, Cmd: cmd,
		WorkingDir: workdir, Labels: r.labels(spec), HostConfig: hc,
	})
	if err != nil {
		return nil, fmt.Errorf("create the sandbox of %s: %w", spec.Key, err)
	}
	if err := r.Engine.StartContainer(ctx, sb.id); err != nil {
		return nil, fmt.Errorf("start the sandbox of %s: %w", spec.Key, err)
	}
	if err := awaitReady(ctx, ready); err != nil {
		return nil, fmt.Errorf("the sandbox of %s: its keeper did not start: %w", spec.Key, err)
	}
	return sb, nil
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

// lifetime is the hard lifetime of an attempt's sandbox.
func lifetime(spec harness.Spec) time.Duration {
	if spec.Timeout <= 0 {
		return maxLifetime
	}
	return spec.Timeout + spec.Task.VerifierTimeout + lifetimeMargin
}

// interceptionAddr is the host:port of the interception's loopback URL.
func interceptionAddr(baseURL string) (string, error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("sandbox without network: the interception URL %q has no address", baseURL)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"https": "443"}[u.Scheme]
		if port == "" {
			port = "80"
		}
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		if host != "localhost" {
			return "", fmt.Errorf("sandbox without network: the interception is at %s, not on this host's loopback", host)
		}
	}
	return net.JoinHostPort(host, port), nil
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
	paths := harness.SandboxPaths{Workdir: sb.workdir, Files: RunDir, Logs: LogsDir}
	if spec.Solution != "" {
		paths.Solution = SolutionDir
	}
	res, err := sb.exec(ctx, keeper.Request{
		Argv: sb.command(spec.Command), Env: harness.SandboxEnv(spec, paths), Dir: sb.workdir,
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

// verify copies the tests in and executes the verifier.
func (sb *sandbox) verify(ctx context.Context, spec harness.VerifySpec) (harness.VerifyResult, error) {
	logs, err := harness.ResetVerifierLogs(sb.ws)
	if err != nil {
		return harness.VerifyResult{}, err
	}
	_ = os.Chmod(logs, 0o777)
	tests := ""
	if spec.Tests != "" {
		tests = TestsDir
		if err := sb.r.Engine.CopyDirIn(ctx, sb.id, spec.Tests, TestsDir); err != nil {
			return harness.VerifyResult{}, fmt.Errorf("copy the tests into the sandbox: %w", err)
		}
	}
	res, err := sb.exec(ctx, keeper.Request{
		Argv: []string{"sh", "-c", spec.Command}, Env: harness.SandboxVerifierEnv(spec, sb.workdir, LogsDir, tests), Dir: sb.workdir,
	}, spec.Timeout, spec.OutputLimit)
	if err != nil {
		return harness.VerifyResult{}, fmt.Errorf("run verifier: %w", err)
	}
	return harness.Verdict(res, spec.Timeout, logs)
}

// exec executes req in the sandbox, through its keeper, within timeout
// (0: none). A command that times out, or whose ctx ends, is killed with
// its process group, and the sandbox with it.
func (sb *sandbox) exec(ctx context.Context, req keeper.Request, timeout time.Duration, limit int) (harness.Result, error) {
	stdout, stderr := harness.NewTail(limit), harness.NewTail(limit)
	ectx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		ectx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	start := time.Now()
	code, err := keeper.Exec(ectx, filepath.Join(sb.runDir, execSocket), req, stdout, stderr)
	res := harness.Result{ExitCode: code, Duration: time.Since(start)}
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() != nil:
		_ = sb.Stop(context.Background())
		return res, ctx.Err()
	case ectx.Err() != nil:
		_ = sb.Stop(context.Background())
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
		if sb.id != "" {
			sb.stopErr = sb.r.Engine.RemoveContainer(ctx, sb.id)
		}
		if sb.forward != nil {
			sb.forward.Close()
		}
		if sb.ownRunDir {
			_ = os.RemoveAll(sb.runDir)
		}
	})
	return sb.stopErr
}
