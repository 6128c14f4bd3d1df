package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/evalflow/evalflow/internal/harness/dockerfile"
	"github.com/evalflow/evalflow/tasksets"
)

// Subdirectories of Workspace.Logs, as Harbor lays out /logs: the
// agent's, the verifier's, and the artifacts both leave for the trace.
const (
	AgentLogs    = "agent"
	VerifierLogs = "verifier"
	ArtifactLogs = "artifacts"
)

// DefaultMount is where a workspace is seen in a sandbox when the task's
// Dockerfile sets no WORKDIR.
const DefaultMount = dockerfile.DefaultWorkdir

// Workspace is a rollout's prepared working tree on the worker.
type Workspace struct {
	Dir   string   // host directory the agent works in (/app in a sandbox)
	Logs  string   // host directory seen as /logs (the verifier writes /logs/verifier)
	Notes []string // what preparing it could not reproduce outside Docker, for the trace
	// Env is the Dockerfile's ENV, KEY=VALUE, for the agent's and the
	// verifier's environment.
	Env []string

	root  string // the temp root to remove
	mount string // where Dir is seen in a sandbox: /app, or the Dockerfile's WORKDIR
	cwd   string // the agent's directory inside Dir, slash-separated ("" is Dir)
	image string // the task's [environment] docker_image
	build string // the task's environment directory, when it holds a Dockerfile

	sandbox Sandbox // the live sandbox of a sandbox runtime (sandbox.go)
}

// Mount is where the workspace is seen inside a sandbox: /app, or the
// task's Dockerfile WORKDIR when that lies elsewhere.
func (w *Workspace) Mount() string { return w.mount }

// Workdir is the agent's working directory as a sandbox sees it (the
// Dockerfile's final WORKDIR).
func (w *Workspace) Workdir() string { return path.Join(w.mount, w.cwd) }

// HostWorkdir is the agent's working directory on the host.
func (w *Workspace) HostWorkdir() string { return filepath.Join(w.Dir, filepath.FromSlash(w.cwd)) }

// PrepareOptions say how PrepareWorkspace treats what it cannot reproduce
// outside a container engine.
type PrepareOptions struct {
	// SkipUnsupported skips what cannot be reproduced (RUN lines, earlier
	// build stages, COPY --from, ADD of a URL, a compose file's services)
	// and lists it in Workspace.Notes; without it such a line is an
	// *UnsupportedError.
	SkipUnsupported bool
}

// UnsupportedError is a task whose environment a runtime cannot reproduce:
// a Dockerfile line it cannot carry out outside a container engine.
type UnsupportedError struct {
	Task string // the task's ID
	// Line is the Dockerfile line (1-based); 0 when the whole environment
	// is meant (the services of a compose file).
	Line int
	// Instruction is the instruction as written, shortened; for the whole
	// environment, the file that asks for it (docker-compose.yaml).
	Instruction string
	Reason      string // e.g. "RUN is not run outside a container engine"
}

func (e *UnsupportedError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("task %s: %s: %s; pass --runtime.skip-unsupported to run the task without them",
			e.Task, e.Instruction, e.Reason)
	}
	return fmt.Sprintf("task %s: Dockerfile line %d: %s: %s; run the task in the docker runtime, or pass --runtime.skip-unsupported to skip such lines",
		e.Task, e.Line, e.Instruction, e.Reason)
}

// PrepareWorkspace makes a workspace for task under parent ("" is
// os.TempDir()): an empty one when the task has no Environment, the
// directory's files as they are when it has no Dockerfile, and else what
// the Dockerfile's interpretable subset asks for: WORKDIR (the agent's
// directory, /app by default), COPY and ADD of build-context paths under
// the WORKDIR (with Docker's copy semantics; --chown and --chmod ignored),
// ENV (Workspace.Env); the instructions that change nothing a workspace
// holds (CMD, EXPOSE, …) are listed in Notes. What only a container engine
// can carry out (RUN, earlier build stages, COPY --from, ADD of a URL, a
// compose file's services) is an *UnsupportedError naming the task and the
// line, unless opts.SkipUnsupported, which lists it in Notes too. A
// symbolic link that points outside the build context, or a special file
// in it, is refused. Remove removes the workspace.
func PrepareWorkspace(parent string, task tasksets.Task, opts PrepareOptions) (*Workspace, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	parent, err := filepath.Abs(parent)
	if err != nil {
		return nil, fmt.Errorf("prepare workspace: %w", err)
	}
	root, err := os.MkdirTemp(parent, "evalflow-ws-*")
	if err != nil {
		return nil, fmt.Errorf("prepare workspace: %w", err)
	}
	w := &Workspace{Dir: filepath.Join(root, "app"), Logs: filepath.Join(root, "logs"), root: root, mount: DefaultMount}
	if err := w.fill(task, opts); err != nil {
		_ = w.Remove()
		var unsupported *UnsupportedError
		if errors.As(err, &unsupported) {
			unsupported.Task = task.ID
			return nil, unsupported
		}
		return nil, fmt.Errorf("prepare workspace for task %s: %w", task.ID, err)
	}
	return w, nil
}

func (w *Workspace) fill(task tasksets.Task, opts PrepareOptions) error {
	for _, d := range []string{w.Dir, filepath.Join(w.Logs, AgentLogs), filepath.Join(w.Logs, VerifierLogs), filepath.Join(w.Logs, ArtifactLogs)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	w.image = dockerImage(task.Info)
	if task.Environment == "" {
		return nil
	}
	ctxDir, err := filepath.EvalSymlinks(task.Environment)
	if err != nil {
		return fmt.Errorf("environment: %w", err)
	}
	if name := ComposeFile(ctxDir); name != "" {
		if !opts.SkipUnsupported {
			return &UnsupportedError{Instruction: name, Reason: MultiContainerReason}
		}
		w.Notes = append(w.Notes, name+": a multi-container task, run here as its Dockerfile's one container")
	}
	data, err := os.ReadFile(filepath.Join(ctxDir, "Dockerfile"))
	if errors.Is(err, fs.ErrNotExist) {
		return dockerfile.CopyContext(ctxDir, w.Dir)
	}
	if err != nil {
		return fmt.Errorf("environment: %w", err)
	}
	w.build = ctxDir
	ins, err := dockerfile.Parse(data)
	if err != nil {
		return err
	}
	plan, err := dockerfile.Interpret(ins, workerLookup)
	if err != nil {
		return err
	}
	if len(plan.Unsupported) > 0 && !opts.SkipUnsupported {
		u := plan.Unsupported[0]
		return &UnsupportedError{Line: u.Line, Instruction: u.Instruction, Reason: u.Reason}
	}
	w.Env, w.Notes = plan.Env, append(w.Notes, plan.Notes...)
	// The workspace is /app and what is under it; a WORKDIR elsewhere
	// becomes the workspace itself.
	if plan.Workdir != DefaultMount && !strings.HasPrefix(plan.Workdir, DefaultMount+"/") {
		w.mount = plan.Workdir
	}
	w.cwd = strings.TrimPrefix(strings.TrimPrefix(plan.Workdir, w.mount), "/")
	if err := os.MkdirAll(w.HostWorkdir(), 0o755); err != nil {
		return err
	}
	notes, err := plan.CopyInto(ctxDir, w.Dir, w.mount)
	w.Notes = append(w.Notes, notes...)
	return err
}

// MultiContainerReason is why a task whose environment is a compose file
// is refused.
const MultiContainerReason = "a multi-container task (its environment is a compose file's services): only the docker runtime runs its services"

// ComposeFile is the name of the compose file that makes the task of the
// environment directory env a multi-container task, "" when it is none:
// docker-compose.yaml or docker-compose.yml at the top of env, as Harbor
// names it. A compose file anywhere else among a task's files (in a
// subdirectory of its environment, in its tests) is only data.
func ComposeFile(env string) string {
	if env == "" {
		return ""
	}
	for _, name := range []string{"docker-compose.yaml", "docker-compose.yml"} {
		if _, err := os.Lstat(filepath.Join(env, name)); err == nil {
			return name
		}
	}
	return ""
}

// dockerImage reads [environment] docker_image from a task's Info.
func dockerImage(info json.RawMessage) string {
	var v struct {
		Environment struct {
			DockerImage string `json:"docker_image"`
		} `json:"environment"`
	}
	if len(info) == 0 || json.Unmarshal(info, &v) != nil {
		return ""
	}
	return v.Environment.DockerImage
}

// Remove stops the workspace's sandbox, if one is attached, and removes
// the workspace, even when the agent left read-only directories in it.
func (w *Workspace) Remove() error {
	if w == nil {
		return nil
	}
	stopErr := w.stopSandbox()
	if w.root == "" {
		return stopErr
	}
	if err := RemoveAll(w.root); err != nil {
		return fmt.Errorf("remove workspace: %w", err)
	}
	return stopErr
}

// RemoveAll removes dir even when a harness left read-only directories in
// it.
func RemoveAll(dir string) error {
	if os.RemoveAll(dir) == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// workerLookup is the worker's environment without credentials: what a
// Dockerfile's ${VAR} falls back to, as the agent inherits it anyway.
func workerLookup(name string) string {
	if IsSecretName(name) {
		return ""
	}
	return os.Getenv(name)
}
