// Package container is the container runtime: every rollout attempt works
// in a sandbox of its own, a container started from the task's image (its
// Dockerfile built by the engine, or its docker_image) on any Docker
// Engine API, Docker's or Podman's. The harness is executed in the
// sandbox, then the verifier in a container of its own beside it (a
// snapshot of the sandbox, its network shared), and both are removed with
// the rollout's workspace. The image need not know about evalflow: the
// built-in agent is mounted into it read-only. Every sandbox has a network
// namespace of its own, and the agent reaches the interception through
// the sandbox's keeper, which listens at the interception's loopback
// address inside and carries each connection over a unix socket: a task
// without internet has no other network at all, and one that allows it
// sits on the engine's bridge, fenced from the worker's host and every
// other sandbox (firewall.go).
package container

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/engine"
	"github.com/evalflow/evalflow/tasksets"
)

// Paths inside every sandbox.
const (
	// AgentPath is where the built-in agent program is mounted.
	AgentPath = "/opt/evalflow/bin/evalflow-agent"
	// RunDir holds task.json, answer.txt and the keeper's sockets.
	RunDir = "/opt/evalflow/run"
	// LogsDir is the rollout's logs (/logs/agent, /logs/verifier).
	LogsDir = "/logs"
	// TestsDir is where the tests are copied for the verifier.
	TestsDir = "/tests"
	// SolutionDir is where the oracle finds the task's solution.
	SolutionDir = "/solution"
	// DefaultWorkdir is the workspace of an image that sets no WORKDIR.
	DefaultWorkdir = "/app"
)

// DefaultImage is the image of a rollout whose task names none.
const DefaultImage = "docker.io/library/debian:bookworm-slim"

// Pull policies for images a task names.
const (
	PullMissing = "missing"
	PullNever   = "never"
)

var (
	_ harness.Runtime           = (*Runtime)(nil)
	_ harness.Verifier          = (*Runtime)(nil)
	_ harness.WorkspacePreparer = (*Runtime)(nil)
)

// Runtime runs rollouts in containers of one engine.
type Runtime struct {
	Engine *engine.Client
	// Agent is the built-in agent program on this host, a static binary:
	// mounted into every sandbox at AgentPath, where it also keeps the
	// sandbox. A harness command naming it runs the mounted copy.
	Agent string
	// Image is the image of a rollout whose task names none; "" is
	// DefaultImage.
	Image string
	// Pull is PullMissing (the default) or PullNever, for images that a
	// task names and the engine lacks.
	Pull string
	// Dir is the parent of the workspaces (the sandboxes' logs and run
	// files); "" is os.TempDir().
	Dir string
	// Worker names this worker in the sandboxes' labels.
	Worker string
	// MaxLifetime caps every sandbox's hard lifetime, after which its
	// keeper ends it and the engine removes it whether or not its worker
	// still runs (0: its timeouts plus 15 minutes, at most 24 hours).
	MaxLifetime time.Duration
	// KeepImages bounds the task images this worker keeps on the engine
	// (images.go): 0 is DefaultKeepImages, < 0 no bound.
	KeepImages int
	Logger     *slog.Logger

	// Network is how a sandbox of a task that allows the internet reaches
	// it: "slirp4netns" (Podman's user-mode stack: a namespace of its own
	// with no link to the host's or any other sandbox's), or an engine
	// network, a bridge, created when missing. "" is slirp4netns on Podman
	// and DefaultBridge on other engines.
	Network string

	images   sync.Map // tag → *build: one build of an image at a time
	repo     string   // ImageRepo when empty; a test's own
	host     owner
	hostOnce sync.Once

	netMu    sync.Mutex
	netReady string // the internet network, once known

	owed owed // containers an engine outage kept this runtime from removing
}

// DefaultBridge is the network of the sandboxes that may reach the
// internet on an engine without slirp4netns: a bridge of its own, whose
// subnet the engine picks clear of the host's, rather than the engine's
// default one.
const DefaultBridge = "evalflow-sandbox"

// Slirp is Podman's user-mode network: each sandbox a namespace and a
// stack of its own, its connections made by the host's sockets.
const Slirp = "slirp4netns"

// internetNetwork is the network of a sandbox that may reach the
// internet; a bridge is created on the engine when missing.
func (r *Runtime) internetNetwork(ctx context.Context) (string, error) {
	r.netMu.Lock()
	defer r.netMu.Unlock()
	if r.netReady != "" {
		return r.netReady, nil
	}
	name := r.Network
	if name == "" {
		v, err := r.Engine.Version(ctx)
		if err != nil {
			return "", err
		}
		name = DefaultBridge
		if strings.HasPrefix(v.Name(), "Podman") {
			name = Slirp
		}
	}
	if name != Slirp {
		if _, err := r.Engine.InspectNetwork(ctx, name); engine.IsNotFound(err) {
			if err := r.Engine.CreateNetwork(ctx, name, map[string]string{labelSandbox: "network"}); err != nil {
				// Another worker of this engine may have made it first.
				if _, again := r.Engine.InspectNetwork(ctx, name); again != nil {
					return "", fmt.Errorf("create the sandboxes' network %s: %w", name, err)
				}
			}
		} else if err != nil {
			return "", fmt.Errorf("the sandboxes' network %s: %w", name, err)
		}
	}
	r.netReady = name
	return name, nil
}

// New is a runtime of engine with the agent program at agent; it checks
// that the engine answers and removes the sandboxes a killed worker of
// this host left.
func New(ctx context.Context, eng *engine.Client, agent string) (*Runtime, error) {
	r := &Runtime{Engine: eng, Agent: agent}
	if err := r.check(ctx); err != nil {
		return nil, err
	}
	if n, err := r.RemoveOrphans(ctx); err != nil {
		return nil, err
	} else if n > 0 {
		r.logger().Info("removed the sandboxes a stopped worker of this host left", "count", n)
	}
	return r, nil
}

func (r *Runtime) check(ctx context.Context) error {
	if r.Engine == nil {
		return errors.New("container runtime: no engine")
	}
	if _, err := r.Engine.Version(ctx); err != nil {
		return fmt.Errorf("container runtime: %w (set DOCKER_HOST, or run scripts/engine.sh)", err)
	}
	fi, err := os.Stat(r.Agent)
	if err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("container runtime: the built-in agent program %q is needed in every sandbox (make build, or set EVALFLOW_AGENT): %v", r.Agent, err)
	}
	return nil
}

func (r *Runtime) logger() *slog.Logger {
	if r.Logger == nil {
		return slog.Default()
	}
	return r.Logger
}

// PrepareWorkspace is a workspace of the task's image: its files are the
// image's, so only the logs are on the host.
func (r *Runtime) PrepareWorkspace(parent string, task tasksets.Task) (*harness.Workspace, error) {
	if parent == "" {
		parent = r.Dir
	}
	return harness.NewSandboxWorkspace(parent, task)
}

// Run starts the rollout's sandbox and executes the harness in it. With a
// workspace, the sandbox stays attached to it for the verifier (and the
// next step of a multi-step task, which runs in it) and is removed with
// it; without one, it is removed when the harness ends. A harness that
// times out ends with its sandbox.
func (r *Runtime) Run(ctx context.Context, spec harness.Spec) (harness.Result, error) {
	if len(spec.Command) == 0 {
		return harness.Result{}, errors.New("run harness: empty command")
	}
	ws := spec.Workspace
	if ws == nil {
		var err error
		if ws, err = r.PrepareWorkspace("", spec.Task); err != nil {
			return harness.Result{}, err
		}
		defer ws.Remove()
	}
	env, err := harness.EnvironmentOf(spec.Task)
	if err != nil {
		return harness.Result{}, harness.TaskConfigError(spec.Task.ID, err)
	}
	if env.GPUs > 0 {
		return harness.Result{}, harness.TaskConfigError(spec.Task.ID, fmt.Errorf("task %s asks for %d GPU(s); the container runtime gives a sandbox none", spec.Task.ID, env.GPUs))
	}
	if sb, ok := ws.Sandbox().(*sandbox); ok {
		// A later step of a multi-step task: its agent works on in the
		// sandbox the earlier steps left, given this step's task.
		if err := sb.nextStep(spec.Task); err != nil {
			return harness.Result{}, err
		}
		res, err := sb.runHarness(ctx, spec, env)
		if err != nil || res.TimedOut {
			_ = ws.Remove()
		}
		return res, err
	}
	if harness.ComposeFile(spec.Task.Environment) != "" {
		return r.runCompose(ctx, spec, ws, env) // compose_run.go
	}
	image, built, err := r.imageFor(ctx, spec.Task, ws, env)
	if err != nil {
		// A build that failed: its output is the reason, for the trace.
		return harness.Result{SessionLogs: built.traceLog()}, err
	}
	buildLog := built.traceLog()
	sb, err := r.start(ctx, spec, ws, image, env)
	if err != nil {
		return harness.Result{SessionLogs: buildLog}, err
	}
	ws.Attach(sb)
	res, err := sb.runHarness(ctx, spec, env)
	res.SessionLogs = append(append(res.SessionLogs, buildLog...), sb.service.traceLog()...)
	if err != nil || res.TimedOut {
		_ = ws.Remove() // stops the sandbox; its logs go with it
	}
	return res, err
}

// Verify executes the verifier in a container of its own beside the
// rollout's sandbox, on a snapshot of what the agent left (verifier.go).
func (r *Runtime) Verify(ctx context.Context, spec harness.VerifySpec) (harness.VerifyResult, error) {
	if spec.Workspace == nil || spec.Command == "" {
		return harness.VerifyResult{}, errors.New("verify: no workspace or no command")
	}
	sb, ok := spec.Workspace.Sandbox().(*sandbox)
	if !ok {
		return harness.VerifyResult{}, errNoSandbox
	}
	return sb.verify(ctx, spec)
}

// cpus is what a sandbox may use of a task's cpus on this host.
func cpus(asked float64) float64 {
	if n := float64(runtime.NumCPU()); asked > n {
		return n
	}
	return asked
}
