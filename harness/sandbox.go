package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
// a runtime (internal/harness/container) uses.

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
	for _, d := range []string{filepath.Join(w.Logs, AgentLogs), filepath.Join(w.Logs, VerifierLogs), filepath.Join(w.Logs, ArtifactLogs)} {
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

// Root is the workspace's own host directory, removed with it: a runtime
// keeps its per-run files there (the task file, the answer, a home).
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

// HasEnvironment reports whether a task brings a system of its own: an
// environment directory or a docker_image.
func HasEnvironment(task tasksets.Task) bool {
	return task.Environment != "" || dockerImage(task.Info) != ""
}

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
