package packaged

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"

	"github.com/evalflow/evalflow/harness"
)

// sessionLogLimit bounds how much of one session log is kept.
const sessionLogLimit = 4 << 20

var _ harness.Remote = (*Runtime)(nil)

// Runtime runs packaged harnesses on the runtime it wraps, and passes every
// other command through to it unchanged. Packaged harnesses run on this
// host's filesystem (the local and netns runtimes): their programs and
// configuration are host paths.
type Runtime struct {
	harness.Runtime
	Installer *Installer
	// Dir is the parent of the session directories (each harness's home,
	// configuration and session logs, outside the workspace); "" is
	// os.TempDir().
	Dir string
	// Unsupported, when set, says why the wrapped runtime cannot run a
	// packaged harness; such a run fails as a configuration error.
	Unsupported string
}

// Unwrap is the wrapped runtime.
func (r *Runtime) Unwrap() harness.Runtime { return r.Runtime }

// Remote reports whether the wrapped runtime is remote.
func (r *Runtime) Remote() bool { return harness.IsRemote(r.Runtime) }

// Run runs spec. A packaged harness is installed (once), configured in a
// session directory of its own, and run; its answer and session logs are
// in the Result. A harness that cannot be installed, or a runtime that
// cannot run it, is a *harness.ConfigError.
func (r *Runtime) Run(ctx context.Context, spec harness.Spec) (harness.Result, error) {
	h, version, ok, err := Parse(spec.Command)
	if !ok {
		return r.Runtime.Run(ctx, spec)
	}
	if err != nil {
		return harness.Result{}, &harness.ConfigError{Err: err}
	}
	if r.Unsupported != "" {
		return harness.Result{}, &harness.ConfigError{Err: fmt.Errorf("packaged harness %s: %s", h.Name, r.Unsupported)}
	}
	bin, err := r.Installer.Install(ctx, h, version)
	if err != nil {
		if ctx.Err() != nil {
			return harness.Result{}, err
		}
		return harness.Result{}, &harness.ConfigError{Err: err}
	}
	// In a sandbox of the task's image (which need not hold Node), the
	// harness runs as its native program, its installation and session
	// directory mounted at their host paths.
	sandboxed := spec.Workspace != nil && spec.Workspace.Dir == ""
	var installed string
	if sandboxed {
		if bin, installed, err = nativeProgram(h, bin); err != nil {
			return harness.Result{}, &harness.ConfigError{Err: fmt.Errorf("task %s works in a container sandbox: %w", spec.Task.ID, err)}
		}
	}
	session, err := os.MkdirTemp(r.Dir, "evalflow-"+h.Name+"-")
	if err != nil {
		return harness.Result{}, fmt.Errorf("%s session directory: %w", h.Name, err)
	}
	defer os.RemoveAll(session)
	command, env, err := h.setup(bin, session, spec)
	if err != nil {
		return harness.Result{}, fmt.Errorf("configure %s: %w", h.Name, err)
	}
	spec.Command = command
	spec.Env = append(env, spec.Env...)
	if sandboxed {
		spec.Mounts = append(spec.Mounts, harness.Mount{Path: installed, ReadOnly: true}, harness.Mount{Path: session})
	}
	res, err := r.Runtime.Run(ctx, spec)
	res.SessionLogs = append(res.SessionLogs, sessionLogs(session, h.logs)...)
	if h.answer != nil && res.Answer == "" {
		if a, aerr := h.answer(session); aerr == nil {
			res.Answer = a
		}
	}
	return res, err
}

// sessionLogs reads the files under the paths (relative to session), in
// lexical order, each up to sessionLogLimit bytes.
func sessionLogs(session string, paths []string) []harness.SessionLog {
	var logs []harness.SessionLog
	for _, p := range paths {
		_ = filepath.WalkDir(filepath.Join(session, p), func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil // a harness that never wrote there leaves nothing to keep
			}
			f, err := os.Open(path)
			if err != nil {
				return nil
			}
			defer f.Close()
			b, err := io.ReadAll(io.LimitReader(f, sessionLogLimit+1))
			if err != nil {
				return nil
			}
			name, _ := filepath.Rel(session, path)
			logs = append(logs, harness.SessionLog{
				Name: name, Content: string(b[:min(len(b), sessionLogLimit)]), Truncated: len(b) > sessionLogLimit,
			})
			return nil
		})
	}
	return logs
}

var _ harness.Verifier = (*Runtime)(nil)

// Verify runs a task's verifier on the wrapped runtime.
func (r *Runtime) Verify(ctx context.Context, spec harness.VerifySpec) (harness.VerifyResult, error) {
	v, ok := r.Runtime.(harness.Verifier)
	if !ok {
		return harness.VerifyResult{}, fmt.Errorf("the %T runtime cannot run verifiers", r.Runtime)
	}
	return v.Verify(ctx, spec)
}

// nativeProgram is the native program of an installed harness (bin is its
// npm launcher, a Node script), and the installation's directory.
func nativeProgram(h Harness, bin string) (program, installed string, err error) {
	i := strings.LastIndex(bin, string(filepath.Separator)+"node_modules"+string(filepath.Separator))
	if i < 0 || h.native == nil {
		return "", "", fmt.Errorf("packaged harness %s has no native program to run in a sandbox", h.Name)
	}
	installed = bin[:i]
	matches, _ := filepath.Glob(filepath.Join(installed, h.native(goruntime.GOARCH)))
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return m, installed, nil
		}
	}
	return "", "", fmt.Errorf("packaged harness %s: no native program for %s under %s", h.Name, goruntime.GOARCH, installed)
}
