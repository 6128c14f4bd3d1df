package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/evalflow/evalflow/tasksets"
)

// A sandbox runtime starts one sandbox per rollout attempt from the task's
// own image: the harness runs in it, then the verifier in the same
// sandbox, then it is removed with the workspace. These are the hooks such
// a runtime (harness/container) uses.

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
func PreparerOf(rt Runtime) (WorkspacePreparer, bool) {
	for rt != nil {
		if p, ok := rt.(WorkspacePreparer); ok {
			return p, true
		}
		w, ok := rt.(Wrapper)
		if !ok {
			return nil, false
		}
		rt = w.Unwrap()
	}
	return nil, false
}

// Sandbox is the live sandbox of a rollout attempt, attached to its
// workspace between the harness and the verifier.
type Sandbox interface {
	// Stop removes the sandbox and what it ran.
	Stop(ctx context.Context) error
}

// NewSandboxWorkspace is the workspace of a task that works in a sandbox
// of its own image: the image's files are the workspace, so only the logs
// directory (/logs in the sandbox) is on the host.
func NewSandboxWorkspace(parent string, task tasksets.Task) (*Workspace, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	root, err := os.MkdirTemp(parent, "evalflow-ws-*")
	if err != nil {
		return nil, fmt.Errorf("prepare workspace: %w", err)
	}
	w := &Workspace{Logs: filepath.Join(root, "logs"), root: root, mount: DefaultMount, image: dockerImage(task.Info)}
	for _, d := range []string{filepath.Join(w.Logs, AgentLogs), filepath.Join(w.Logs, VerifierLogs)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			_ = w.Remove()
			return nil, fmt.Errorf("prepare workspace: %w", err)
		}
	}
	if task.Environment != "" {
		if _, err := os.Stat(filepath.Join(task.Environment, "Dockerfile")); err == nil {
			w.build = task.Environment
		}
	}
	return w, nil
}

// Image is the task's [environment] docker_image, "" when it names none.
func (w *Workspace) Image() string { return w.image }

// BuildContext is the task's environment directory when it holds a
// Dockerfile, "" otherwise.
func (w *Workspace) BuildContext() string { return w.build }

// Root is the workspace's own host directory, removed with it: a sandbox
// runtime keeps its per-attempt files there.
func (w *Workspace) Root() string { return w.root }

// Attach ties a live sandbox to the workspace: Remove stops it.
func (w *Workspace) Attach(s Sandbox) { w.sandbox = s }

// Sandbox is the live sandbox attached to the workspace, or nil.
func (w *Workspace) Sandbox() Sandbox { return w.sandbox }

// stopSandbox stops the attached sandbox, if any.
func (w *Workspace) stopSandbox() error {
	if w.sandbox == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := w.sandbox.Stop(ctx)
	w.sandbox = nil
	return err
}

// SandboxPaths are where a harness in a sandbox finds its files.
type SandboxPaths struct {
	// Workdir is the harness's working directory (EVALFLOW_WORKDIR and
	// EVALFLOW_WORKSPACE).
	Workdir string
	// Files holds task.json and answer.txt.
	Files string
	// Logs is EVALFLOW_LOGS.
	Logs string
	// Solution is EVALFLOW_SOLUTION, when set.
	Solution string
}

// SandboxEnv is the environment of a harness in a sandbox: nothing of the
// worker's, the contract variables (see Env) for the paths inside, then
// spec.Env. The sandbox's image supplies the rest (PATH, its ENV).
func SandboxEnv(spec Spec, p SandboxPaths) []string {
	return contractEnv(nil, spec, envPaths{workdir: p.Workdir, files: p.Files, workspace: p.Workdir, logs: p.Logs, solution: p.Solution})
}

// SandboxVerifierEnv is the environment of a verifier in a sandbox: the
// paths inside, then the task's verifier env.
func SandboxVerifierEnv(spec VerifySpec, workdir, logs, tests string) []string {
	return verifierEnv(nil, spec, verifierPaths{tests: tests, workspace: workdir, logs: logs, verifierLogs: logs + "/" + VerifierLogs})
}

// WriteTaskFile writes the task as the harness may see it to dir/task.json.
func WriteTaskFile(dir string, t tasksets.Task) error { return writeTaskFile(dir, t) }

// ReadAnswer reads the answer a harness wrote to path, "" when none.
func ReadAnswer(path string) string { return readAnswer(path) }

// Tail is a writer that keeps the last limit bytes written (0:
// DefaultOutputLimit).
type Tail interface {
	io.Writer
	String() string
}

// NewTail is a Tail of limit bytes.
func NewTail(limit int) Tail { return newTail(limit) }

// ResetVerifierLogs empties the workspace's logs/verifier before a
// verifier runs and returns its host path: whatever the agent left there
// must not count.
func ResetVerifierLogs(ws *Workspace) (string, error) { return resetVerifierLogs(ws) }

// Verdict reads the reward a finished verifier wrote to dir (res is how
// its process ended); a missing or invalid reward is a *VerifierError.
func Verdict(res Result, timeout time.Duration, dir string) (VerifyResult, error) {
	return verdict(res, timeout, dir)
}

// Environment is what a task's [environment] asks of its sandbox.
type Environment struct {
	DockerImage string  `json:"docker_image"`
	CPUs        float64 `json:"cpus"`
	MemoryMB    int64   `json:"memory_mb"`
	// AllowInternet is nil when the task does not say (allowed).
	AllowInternet   *bool   `json:"allow_internet"`
	GPUs            int     `json:"gpus"`
	BuildTimeoutSec float64 `json:"build_timeout_sec"`
}

// Internet reports whether the task lets its sandbox reach the internet.
func (e Environment) Internet() bool { return e.AllowInternet == nil || *e.AllowInternet }

// EnvironmentOf reads the [environment] table a task's info carries.
func EnvironmentOf(task tasksets.Task) (Environment, error) {
	var info struct {
		Environment Environment `json:"environment"`
	}
	if len(task.Info) == 0 {
		return Environment{}, nil
	}
	if err := json.Unmarshal(task.Info, &info); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return Environment{}, fmt.Errorf("task %s: [environment] %s: %v", task.ID, typeErr.Field, err)
		}
		// Info that is not an object carries no environment.
		return Environment{}, nil
	}
	return info.Environment, nil
}

// LoopbackAddr is the host:port of the interception's URL, which a
// sandbox's forwarder listens at inside and dials on this host: it must be
// on this host's loopback.
func LoopbackAddr(baseURL string) (string, error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("sandbox: the interception URL %q has no address", baseURL)
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
			return "", fmt.Errorf("sandbox: the interception is at %s, not on this host's loopback", host)
		}
	}
	return net.JoinHostPort(host, port), nil
}
