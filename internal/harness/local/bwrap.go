package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/container/keeper"
	"github.com/evalflow/evalflow/tasksets"
)

var (
	_ harness.Remote      = (*Bwrap)(nil)
	_ harness.Verifier    = (*Bwrap)(nil)
	_ harness.TaskChecker = (*Bwrap)(nil)
)

// Paths inside a bubblewrap sandbox.
const (
	sandboxLogs     = "/logs"
	sandboxTests    = "/tests"
	sandboxSolution = "/solution"
	sandboxFiles    = "/run/evalflow" // task.json and answer.txt
)

// systemDirs are the host directories every sandbox sees, read-only.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc"}

// Bwrap runs each harness in a bubblewrap (bwrap) sandbox without Docker:
// the host's system read-only (/usr, /bin, /sbin, /lib, /lib64 and /etc,
// one by one), the rollout's workspace read-write at /app (or the task's
// WORKDIR), its own /logs, a fresh /tmp (tmpfs), a fresh home (bound at
// $HOME, or /root, with HOME set) and its own process and IPC namespaces.
// Nothing else of the host is there: not the task's tests or solution (the
// oracle's /solution is the only exception), and /tests only for the
// verifier. Task and answer files are under /run/evalflow.
//
// The harness program must be reachable inside, so its executable is bound
// read-only at its own path: a command given as a path binds that file; a
// command found on PATH outside the system directories binds its whole
// directory (so that programs beside it, such as a runtime it needs, are
// there too). Anything else it needs must be under the system directories.
//
// Every sandbox has a network namespace of its own holding only loopback,
// so nothing of the host answers inside: the built-in agent (Agent, bound
// read-only) listens at the interception's loopback address inside and
// carries each of the harness's connections over a unix socket the worker
// serves, the one way out, while the harness runs. The verifier has no
// way out at all. IsolateNet leaves out the forwarder (harnesses reach the
// interception through a tunnel, as with Netns); HostNet shares the host's
// network instead, isolating nothing of it.
// Harnesses die with the worker as Runtime's do (bwrap's --die-with-parent
// too), and a sandbox's processes die with its bwrap.
type Bwrap struct {
	// Binary is the bwrap program; "bwrap" when empty.
	Binary string
	// Agent is the built-in agent program, static, whose forwarder is the
	// sandbox's way to the interception.
	Agent string
	// IsolateNet gives the sandbox no forwarder: only a tunnel reaches it.
	IsolateNet bool
	// HostNet shares the host's network with the sandbox (no
	// --unshare-net): its harness reaches everything the host does.
	HostNet bool
	// Local runs bwrap (workdirs, timeouts, process groups).
	Local Runtime
}

// Paths of the forwarder inside a bubblewrap sandbox.
const (
	sandboxAgent = "/opt/evalflow/bin/evalflow-agent"
	sandboxNet   = "/run/evalflow-net" // the interception socket
)

// Remote implements harness.Remote: a sandbox without a forwarder does not reach
// this host's loopback.
func (b *Bwrap) Remote() bool { return b.IsolateNet && !b.HostNet }

// forwards reports whether the sandbox's harness reaches the interception
// through the forwarder.
func (b *Bwrap) forwards() bool { return !b.IsolateNet && !b.HostNet }

func (b *Bwrap) binary() string {
	if b.Binary == "" {
		return "bwrap"
	}
	return b.Binary
}

// CheckTask refuses a task that asks for a separate verifier: a bubblewrap
// sandbox is the host's system, not a fresh one of the verifier's.
func (b *Bwrap) CheckTask(task tasksets.Task) error { return refuseSeparate(task, "bwrap") }

// Run runs the harness in a sandbox around spec.Workspace, or around a
// fresh empty workspace, removed afterwards, when there is none.
func (b *Bwrap) Run(ctx context.Context, spec harness.Spec) (harness.Result, error) {
	if len(spec.Command) == 0 {
		return harness.Result{}, errors.New("run harness: empty command")
	}
	if err := ctx.Err(); err != nil {
		return harness.Result{}, err
	}
	command, exeBinds, err := commandBinds(spec.Command)
	if err != nil {
		return harness.Result{}, err
	}
	ws := spec.Workspace
	if ws == nil {
		if ws, err = harness.PrepareWorkspace(b.Local.Dir, tasksets.Task{ID: spec.Task.ID}, harness.PrepareOptions{}); err != nil {
			return harness.Result{}, err
		}
		if !b.Local.Keep {
			defer ws.Remove()
		}
	}
	files, err := scratch(ws, "run")
	if err != nil {
		return harness.Result{}, fmt.Errorf("harness files: %w", err)
	}
	if !b.Local.Keep {
		defer harness.RemoveAll(files)
	}
	if err := harness.WriteTaskFile(files, spec.Task); err != nil {
		return harness.Result{}, err
	}
	home, homeMount, err := b.home(ws)
	if err != nil {
		return harness.Result{}, err
	}
	if !b.Local.Keep {
		defer harness.RemoveAll(home)
	}
	args := b.sandboxArgs(ws, home, homeMount)
	args = append(args, "--bind", files, sandboxFiles)
	view := harness.Paths{
		Workdir: ws.Workdir(), Files: sandboxFiles, Workspace: ws.Mount(), Logs: sandboxLogs,
		WorkspaceEnv: ws.Env, Home: homeMount,
	}
	if spec.Solution != "" {
		args = append(args, "--ro-bind", spec.Solution, sandboxSolution)
		view.Solution = sandboxSolution
	}
	args = append(args, exeBinds...)
	if b.forwards() && spec.BaseURL != "" {
		fwd, err := b.forward(spec.BaseURL)
		if err != nil {
			return harness.Result{}, err
		}
		defer fwd.Close()
		args = append(args, fwd.binds...)
		command = append(fwd.command, command...)
	}
	args = append(args, "--chdir", ws.Workdir(), "--")
	res, err := b.Local.exec(ctx, proc{
		argv: append(append([]string{b.binary()}, args...), command...),
		dir:  ws.Dir, env: harness.Env(os.Environ(), spec, view),
		timeout: spec.Timeout, outputLimit: spec.OutputLimit,
	})
	if err != nil {
		return res, err
	}
	res.Answer = harness.ReadAnswer(filepath.Join(files, harness.AnswerFile))
	return res, nil
}

// Verify runs the verifier in a sandbox like the agent's, with the tests
// read-only at /tests, a fresh home, and no /solution.
func (b *Bwrap) Verify(ctx context.Context, spec harness.VerifySpec) (harness.VerifyResult, error) {
	ws, err := checkVerifySpec(spec)
	if err != nil {
		return harness.VerifyResult{}, err
	}
	logs, err := harness.ResetVerifierLogs(ws)
	if err != nil {
		return harness.VerifyResult{}, err
	}
	home, homeMount, err := b.home(ws)
	if err != nil {
		return harness.VerifyResult{}, err
	}
	if !b.Local.Keep {
		defer harness.RemoveAll(home)
	}
	args := b.sandboxArgs(ws, home, homeMount)
	paths := harness.VerifierPaths{Workspace: ws.Mount(), Logs: sandboxLogs, VerifierLogs: sandboxLogs + "/" + harness.VerifierLogs, Home: homeMount}
	if spec.Tests != "" {
		args = append(args, "--ro-bind", spec.Tests, sandboxTests)
		paths.Tests = sandboxTests
	}
	args = append(args, "--chdir", ws.Workdir(), "--", "sh", "-c", spec.Command)
	res, err := b.Local.exec(ctx, proc{
		argv: append([]string{b.binary()}, args...), dir: ws.Dir,
		env:     harness.VerifierEnv(os.Environ(), spec, paths),
		timeout: spec.Timeout, outputLimit: spec.OutputLimit,
	})
	if err != nil {
		return harness.VerifyResult{}, fmt.Errorf("run verifier: %w", err)
	}
	return harness.Verdict(res, spec.Timeout, logs)
}

// forwarder is a harness's way out of its sandbox's network namespace.
type forwarder struct {
	ln      net.Listener
	dir     string
	binds   []string // bwrap arguments
	command []string // the prefix of the harness command
}

// forward serves the interception socket of one harness run, carrying
// each connection to the interception at baseURL.
func (b *Bwrap) forward(baseURL string) (*forwarder, error) {
	if b.Agent == "" {
		return nil, &harness.ConfigError{Err: errors.New("bwrap runtime: the built-in agent program carries a sandbox's model calls out of its network namespace, and none is set (make build, or set EVALFLOW_AGENT; --runtime.bwrap-host-net shares the host's network instead)")}
	}
	target, err := harness.LoopbackAddr(baseURL)
	if err != nil {
		return nil, err
	}
	// A unix socket's path is short: a directory of its own.
	dir, err := os.MkdirTemp("", "evalflow-net-")
	if err != nil {
		return nil, fmt.Errorf("sandbox forwarder: %w", err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "interception.sock"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("sandbox forwarder: %w", err)
	}
	go keeper.Forward(ln, func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", target)
	})
	return &forwarder{
		ln: ln, dir: dir,
		binds:   []string{"--ro-bind", b.Agent, sandboxAgent, "--bind", dir, sandboxNet},
		command: []string{sandboxAgent, keeper.Command, "forward", "--listen", target, "--socket", sandboxNet + "/interception.sock", "--"},
	}, nil
}

// Close stops serving and removes the socket.
func (f *forwarder) Close() error {
	err := f.ln.Close()
	os.RemoveAll(f.dir)
	return err
}

// home makes a fresh home directory in the workspace's root and says where
// the sandbox sees it: at $HOME when that is an absolute path other than
// /, else at /root.
func (b *Bwrap) home(ws *harness.Workspace) (dir, mount string, err error) {
	dir, err = scratch(ws, "home")
	if err != nil {
		return "", "", fmt.Errorf("sandbox home: %w", err)
	}
	mount = os.Getenv("HOME")
	if !filepath.IsAbs(mount) || filepath.Clean(mount) == "/" {
		mount = "/root"
	}
	return dir, filepath.Clean(mount), nil
}

// sandboxArgs are the bwrap arguments every sandbox of ws has.
func (b *Bwrap) sandboxArgs(ws *harness.Workspace, home, homeMount string) []string {
	args := []string{"--die-with-parent", "--unshare-pid", "--unshare-ipc"}
	if !b.HostNet {
		args = append(args, "--unshare-net")
	}
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			// /bin -> usr/bin on merged-/usr systems: the same link.
			if target, err := os.Readlink(d); err == nil {
				args = append(args, "--symlink", target, d)
			}
		default:
			args = append(args, "--ro-bind", d, d)
		}
	}
	// A resolv.conf that links out of /etc (systemd-resolved's, in /run).
	if target, err := filepath.EvalSymlinks("/etc/resolv.conf"); err == nil && !underSystem(target) {
		args = append(args, "--ro-bind", target, target)
	}
	return append(args,
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--bind", home, homeMount,
		"--bind", ws.Dir, ws.Mount(),
		"--bind", ws.Logs, sandboxLogs,
	)
}

// commandBinds finds the harness program on the host and returns the
// command with it, and the binds that make it reachable inside: a path is
// made absolute and bound as a file; a program found on PATH outside the
// system directories has its directory bound. A program that cannot be
// found is an error wrapping exec.ErrNotFound.
func commandBinds(command []string) ([]string, []string, error) {
	name := command[0]
	found, err := exec.LookPath(name)
	if err != nil {
		return nil, nil, fmt.Errorf("start harness %q: %w", name, err)
	}
	abs, err := filepath.Abs(found)
	if err != nil {
		return nil, nil, fmt.Errorf("start harness %q: %w", name, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, nil, fmt.Errorf("start harness %q: %w", name, err)
	}
	out := append([]string{abs}, command[1:]...)
	if underSystem(abs) && underSystem(real) {
		return out, nil, nil
	}
	if strings.ContainsRune(name, '/') {
		return out, []string{"--ro-bind", abs, abs}, nil
	}
	dir := filepath.Dir(abs)
	return out, []string{"--ro-bind", dir, dir}, nil
}

// underSystem reports whether p is under a directory every sandbox sees.
func underSystem(p string) bool {
	for _, d := range systemDirs {
		if within(d, p) {
			return true
		}
	}
	return false
}

// within reports whether p is dir or under it (both clean, absolute).
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
