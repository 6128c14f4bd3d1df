package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/evalflow/evalflow/tasksets"
)

// Subdirectories of Workspace.Logs, as Harbor lays out /logs.
const (
	AgentLogs    = "agent"
	VerifierLogs = "verifier"
)

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

// hostWorkdir is the agent's working directory on the host.
func (w *Workspace) hostWorkdir() string { return filepath.Join(w.Dir, filepath.FromSlash(w.cwd)) }

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
	for _, d := range []string{w.Dir, filepath.Join(w.Logs, AgentLogs), filepath.Join(w.Logs, VerifierLogs)} {
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
	for _, name := range []string{"docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml"} {
		if _, err := os.Lstat(filepath.Join(ctxDir, name)); err != nil {
			continue
		}
		if !opts.SkipUnsupported {
			return &UnsupportedError{Instruction: name, Reason: "its services are not started outside a container engine"}
		}
		w.Notes = append(w.Notes, name+": its services are not started outside docker")
	}
	dockerfile, err := os.ReadFile(filepath.Join(ctxDir, "Dockerfile"))
	if errors.Is(err, fs.ErrNotExist) {
		return copyTree(ctxDir, ctxDir, w.Dir)
	}
	if err != nil {
		return fmt.Errorf("environment: %w", err)
	}
	w.build = ctxDir
	ins, err := parseDockerfile(dockerfile)
	if err != nil {
		return err
	}
	plan, err := planDockerfile(ins, workerLookup)
	if err != nil {
		return err
	}
	if len(plan.unsupported) > 0 && !opts.SkipUnsupported {
		return plan.unsupported[0]
	}
	w.Env, w.Notes = plan.env, append(w.Notes, plan.notes...)
	// The workspace is /app and what is under it; a WORKDIR elsewhere
	// becomes the workspace itself.
	if plan.workdir != DefaultMount && !strings.HasPrefix(plan.workdir, DefaultMount+"/") {
		w.mount = plan.workdir
	}
	w.cwd = strings.TrimPrefix(strings.TrimPrefix(plan.workdir, w.mount), "/")
	if err := os.MkdirAll(w.hostWorkdir(), 0o755); err != nil {
		return err
	}
	for _, op := range plan.copies {
		if err := w.copy(ctxDir, op); err != nil {
			return fmt.Errorf("Dockerfile line %d: %s: %w", op.in.line, op.in.String(), err)
		}
	}
	return nil
}

// copy carries out one COPY source with Docker's semantics: a directory's
// contents go into the destination; a file goes to the destination, or
// into it when it is a directory (a trailing slash, several sources, or an
// existing directory).
func (w *Workspace) copy(ctxDir string, op copyOp) error {
	rel, ok := strings.CutPrefix(op.dst, w.mount)
	if !ok || (rel != "" && rel[0] != '/') {
		w.Notes = append(w.Notes, fmt.Sprintf("%s: %s is outside the workspace %s, not copied", op.in.String(), op.dst, w.mount))
		return nil
	}
	dst := filepath.Join(w.Dir, filepath.FromSlash(rel))
	matches, err := filepath.Glob(filepath.Join(ctxDir, filepath.FromSlash(op.src)))
	if err != nil {
		return fmt.Errorf("source %s: %w", shorten(op.src, 80), err)
	}
	if len(matches) == 0 {
		return fmt.Errorf("source %s: not in the build context", shorten(op.src, 80))
	}
	intoDir := op.intoDir || len(matches) > 1
	for _, m := range matches {
		src, err := inContext(ctxDir, m)
		if err != nil {
			return err
		}
		fi, err := os.Stat(src)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			if err := copyTree(ctxDir, src, dst); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			target := dst
			if di, err := os.Stat(dst); intoDir || (err == nil && di.IsDir()) {
				target = filepath.Join(dst, filepath.Base(m))
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := copyFile(src, target, fi.Mode().Perm()); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s is %s", rel2(ctxDir, m), tasksets.DescribeMode(fi.Mode()))
		}
	}
	return nil
}

// inContext resolves the links in p and checks it stays in ctxDir.
func inContext(ctxDir, p string) (string, error) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("%s: %w", rel2(ctxDir, p), errors.Unwrap(err))
	}
	if !within(ctxDir, real) {
		return "", fmt.Errorf("%s points outside the build context", rel2(ctxDir, p))
	}
	return real, nil
}

// copyTree copies the contents of directory src into dst (created),
// keeping permissions; symbolic links are copied as links when they point
// inside ctxDir and refused otherwise, and special files are refused.
func copyTree(ctxDir, src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, fi.Mode().Perm()|0o700)
		case fi.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			resolved := link
			if !filepath.IsAbs(link) {
				resolved = filepath.Join(filepath.Dir(p), link)
			}
			if filepath.IsAbs(link) || !within(ctxDir, resolved) {
				return fmt.Errorf("%s is a symbolic link pointing outside the build context", rel2(ctxDir, p))
			}
			// In the workspace it must not climb out of what is copied.
			if !within(src, resolved) {
				return fmt.Errorf("%s is a symbolic link pointing outside the directory copied", rel2(ctxDir, p))
			}
			_ = os.Remove(target)
			return os.Symlink(link, target)
		case fi.Mode().IsRegular():
			return copyFile(p, target, fi.Mode().Perm())
		default:
			return fmt.Errorf("%s is %s", rel2(ctxDir, p), tasksets.DescribeMode(fi.Mode()))
		}
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	// A link at dst (copied earlier) must not redirect the write.
	if fi, err := os.Lstat(dst); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if err := os.Remove(dst); err != nil {
			return err
		}
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, perm)
}

// within reports whether p is dir or under it (both clean, absolute).
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// rel2 names p relative to the build context, for errors.
func rel2(ctxDir, p string) string {
	if rel, err := filepath.Rel(ctxDir, p); err == nil {
		return rel
	}
	return p
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
	if os.RemoveAll(w.root) == nil {
		return stopErr
	}
	_ = filepath.WalkDir(w.root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(w.root); err != nil {
		return fmt.Errorf("remove workspace: %w", err)
	}
	return stopErr
}

// scratch makes a fresh directory for one run's own files (the task file,
// the answer, a home) in the workspace's root, outside Dir.
func (w *Workspace) scratch(prefix string) (string, error) {
	return os.MkdirTemp(w.root, prefix+"-*")
}
