// Package local runs harnesses on this host's files: as subprocesses of
// the worker (Runtime), in a network namespace (Netns), or in a bubblewrap
// sandbox (Bwrap); each is also the verifier of the tasks it runs.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/hostpaths"
	"github.com/evalflow/evalflow/tasksets"
)

// DefaultGrace is how long a harness has between SIGTERM and SIGKILL when
// Runtime.Grace is 0.
const DefaultGrace = 2 * time.Second

var (
	_ harness.Runtime     = (*Runtime)(nil)
	_ harness.Verifier    = (*Runtime)(nil)
	_ harness.TaskChecker = (*Runtime)(nil)
)

// Runtime runs harnesses as subprocesses of the worker, each in its own
// process group and its own temporary workdir.
//
// A harness dies with its worker, however the worker ends (SIGKILL, a
// crash, the OOM killer), so that no orphan keeps spending a provider's
// tokens: the kernel kills the harness process when the worker dies
// (Pdeathsig, Linux), and a supervisor kills the rest of its process group,
// the harness's own children included. The supervisor is a /bin/sh that
// leads the group and waits on a pipe only the worker holds: the worker's
// death closes it. Leading the group also keeps its id from being reused
// while the supervisor lives. A process that leaves the group (setsid) is
// out of its reach.
type Runtime struct {
	// Dir is the parent of per-rollout temporary workdirs; "" is os.TempDir().
	Dir string
	// Keep leaves workdirs in place after the run, for debugging.
	Keep bool
	// Grace is the time between SIGTERM and SIGKILL on timeout or
	// cancellation; 0 is DefaultGrace.
	Grace time.Duration
}

// Run runs spec.Command in a fresh workdir holding task.json, with the
// environment harness.Env builds, and waits for it. With spec.Workspace it runs in
// the workspace instead (EVALFLOW_WORKSPACE, EVALFLOW_LOGS and the
// Dockerfile's ENV set), with task.json and answer.txt in a directory of
// their own outside it; the workspace is left for the verifier. On spec.Timeout the whole process
// group is terminated and the Result says TimedOut; when ctx is done first the
// group is terminated too and ctx.Err() is returned with the partial Result.
// A command that cannot be found returns an error wrapping exec.ErrNotFound.
func (l *Runtime) Run(ctx context.Context, spec harness.Spec) (harness.Result, error) {
	return l.runWith(ctx, spec, nil)
}

// CheckTask refuses a task whose own scripts assume the paths of a sandbox
// (see hostpaths.Check): run on this host's files, they would find none of
// them; and one that asks for a separate verifier.
func (l *Runtime) CheckTask(task tasksets.Task) error {
	if err := refuseSeparate(task, "local"); err != nil {
		return err
	}
	return hostpaths.Check(task, "local")
}

// refuseSeparate is the error of a runtime that has no separate verifier
// to give a task that asks for one, nil for any other task.
func refuseSeparate(task tasksets.Task, runtime string) error {
	setup, err := harness.VerifierSetupOf(task)
	if err != nil {
		return &harness.ConfigError{Err: err}
	}
	if !setup.Separate() {
		return nil
	}
	return &harness.ConfigError{Err: fmt.Errorf("task %s asks for [verifier] environment_mode = %q (a verifier in a fresh sandbox, fed only the task's artifacts), which the %s runtime cannot give: run it with --runtime docker (auto picks it where a container engine answers)", task.ID, harness.VerifierSeparate, runtime)}
}

// runWith is Run; onOrphan, if set, is a command the supervisor runs when
// the worker dies before the harness ends (a container to remove, say).
func (l *Runtime) runWith(ctx context.Context, spec harness.Spec, onOrphan []string) (harness.Result, error) {
	if len(spec.Command) == 0 {
		return harness.Result{}, errors.New("run harness: empty command")
	}
	if err := ctx.Err(); err != nil {
		return harness.Result{}, err
	}
	dirs, err := l.makeRunDirs(spec)
	if err != nil {
		return harness.Result{}, err
	}
	defer dirs.cleanup()
	view := harness.Paths{Workdir: dirs.cwd, Files: dirs.files}
	if ws := spec.Workspace; ws != nil {
		view.Workspace, view.Logs, view.WorkspaceEnv = ws.Dir, ws.Logs, ws.Env
	}
	view.Solution = spec.Solution
	res, err := l.exec(ctx, proc{
		argv: spec.Command, dir: dirs.cwd, env: harness.Env(os.Environ(), spec, view),
		timeout: spec.Timeout, outputLimit: spec.OutputLimit, onOrphan: onOrphan,
	})
	if err != nil {
		return res, err
	}
	res.Answer = harness.ReadAnswer(filepath.Join(dirs.files, harness.AnswerFile))
	return res, nil
}

// proc is one process to run in its own process group.
type proc struct {
	argv        []string
	dir         string
	env         []string
	timeout     time.Duration
	outputLimit int
	onOrphan    []string
}

// exec runs p to completion. On p.timeout the process group is terminated
// and the Result says TimedOut; when ctx is done first the group is
// terminated too and ctx.Err() is returned with the partial Result.
func (l *Runtime) exec(ctx context.Context, p proc) (harness.Result, error) {
	runCtx := ctx
	if p.timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	res, killed, err := l.run(runCtx, p)
	if err != nil {
		return res, err
	}
	if killed {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		res.TimedOut = true
	}
	return res, nil
}

// runDirs are where one harness run works: its working directory, the
// directory of its task and answer files, and what removes them.
type runDirs struct {
	cwd, files string
	cleanup    func()
}

// makeRunDirs makes a run's directories. Without a workspace it is a
// fresh workdir holding task.json, removed afterwards (unless Keep). With
// one, the harness works in the workspace, which stays for the verifier,
// and its files live in a directory of their own outside it, so the
// agent's files and evalflow's never mix.
func (l *Runtime) makeRunDirs(spec harness.Spec) (runDirs, error) {
	var d runDirs
	if ws := spec.Workspace; ws != nil {
		files, err := scratch(ws, "run")
		if err != nil {
			return d, fmt.Errorf("harness files: %w", err)
		}
		d = runDirs{cwd: ws.HostWorkdir(), files: files}
	} else {
		dir, err := l.makeWorkdir()
		if err != nil {
			return d, err
		}
		d = runDirs{cwd: dir, files: dir}
	}
	d.cleanup = func() {
		if !l.Keep {
			_ = harness.RemoveAll(d.files)
		}
	}
	if err := harness.WriteTaskFile(d.files, spec.Task); err != nil {
		_ = harness.RemoveAll(d.files)
		return runDirs{}, err
	}
	return d, nil
}

// makeWorkdir creates a fresh temporary workdir under Dir.
func (l *Runtime) makeWorkdir() (string, error) {
	parent := l.Dir
	if parent == "" {
		parent = os.TempDir()
	}
	parent, err := filepath.Abs(parent)
	if err != nil {
		return "", fmt.Errorf("harness workdir: %w", err)
	}
	dir, err := os.MkdirTemp(parent, "evalflow-rollout-*")
	if err != nil {
		return "", fmt.Errorf("harness workdir: %w", err)
	}
	return dir, nil
}

// run starts the process and waits for it. killed reports whether ctx ended
// it (the caller tells timeout from cancellation).
func (l *Runtime) run(ctx context.Context, p proc) (res harness.Result, killed bool, err error) {
	grace := l.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	sup, err := startSupervisor(p.onOrphan)
	if err != nil {
		return res, false, err
	}
	// The group dies with its supervisor once the harness is done (or could
	// not start): the worker's own SIGKILL, or the supervisor's on EOF.
	defer sup.stop()
	pgid := sup.pgid()

	stdout, stderr := harness.NewTail(p.outputLimit), harness.NewTail(p.outputLimit)
	outR, outW, err := os.Pipe()
	if err != nil {
		return res, false, fmt.Errorf("harness stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(outR, outW)
		return res, false, fmt.Errorf("harness stderr pipe: %w", err)
	}

	var canceled atomic.Bool
	cmd := exec.CommandContext(ctx, p.argv[0], p.argv[1:]...)
	cmd.Dir = p.dir
	cmd.Env = p.env
	// Pipes we own (*os.File) rather than io.Writers: exec then starts no
	// copying goroutines, and Wait returns as soon as the leader exits even if
	// a grandchild still holds the pipes.
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.SysProcAttr = harnessProcAttr(pgid)
	cmd.Cancel = func() error {
		canceled.Store(true)
		return signalGroup(pgid, syscall.SIGTERM)
	}
	// After the grace period exec SIGKILLs the harness; the group is
	// SIGKILLed below once the harness is gone.
	cmd.WaitDelay = grace

	start := time.Now()
	if err := startHarness(cmd); err != nil {
		closeAll(outR, outW, errR, errW)
		// The error names the program, never its environment.
		return res, false, fmt.Errorf("start harness %q: %w", p.argv[0], err)
	}
	closeAll(outW, errW)

	var copying sync.WaitGroup
	copying.Add(2)
	go drain(&copying, stdout, outR)
	go drain(&copying, stderr, errR)

	waitErr := cmd.Wait()
	res.Duration = time.Since(start)
	// Whatever is left of the group (background children of the harness, and
	// the supervisor) dies with it; this also closes the pipes they hold.
	_ = signalGroup(pgid, syscall.SIGKILL)
	waitDrained(&copying, grace, outR, errR)
	closeAll(outR, errR)

	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	if cmd.ProcessState == nil {
		return res, false, fmt.Errorf("wait harness %q: %w", p.argv[0], waitErr)
	}
	res.ExitCode = cmd.ProcessState.ExitCode()
	return res, canceled.Load(), nil
}

// supervisorScript is what the supervisor runs: it ignores the signals that
// end a harness gently (it must outlive the harness to clean up after it)
// and waits for EOF on its stdin, which only the worker writes to. EOF
// means the worker closed it, or died: it then runs its arguments, if any,
// and kills its process group, itself included.
const supervisorScript = `trap '' TERM INT HUP QUIT; read -r _; "$@"; kill -KILL 0`

// supervisor is the process leading a harness's process group.
type supervisor struct {
	cmd  *exec.Cmd
	pipe *os.File // the write end of its stdin
}

func startSupervisor(onOrphan []string) (*supervisor, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("harness supervisor pipe: %w", err)
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", supervisorScript, "evalflow-harness-supervisor"}, onOrphan...)...)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("start harness supervisor: %w", err)
	}
	return &supervisor{cmd: cmd, pipe: w}, nil
}

// pgid is the harness's process group: the supervisor's pid.
func (s *supervisor) pgid() int { return s.cmd.Process.Pid }

// stop ends the supervisor and whatever is left of its group, and reaps it.
func (s *supervisor) stop() {
	_ = signalGroup(s.pgid(), syscall.SIGKILL)
	_ = s.pipe.Close()
	_ = s.cmd.Wait()
}

// drain copies r into w until EOF or until r is closed.
func drain(wg *sync.WaitGroup, w io.Writer, r io.Reader) {
	defer wg.Done()
	_, _ = io.Copy(w, r)
}

// waitDrained waits for the copying goroutines. A process that left the group
// (setsid) could hold the pipes forever, so after grace the read ends are
// closed, which ends the copies.
func waitDrained(wg *sync.WaitGroup, grace time.Duration, readers ...*os.File) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		closeAll(readers...)
		<-done
	}
}

// signalGroup signals the process group led by pid. A group that is already
// gone is os.ErrProcessDone.
func signalGroup(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// scratch makes a fresh directory for one run's own files (the task file,
// the answer, a home) in the workspace's root, outside its Dir.
func scratch(ws *harness.Workspace, prefix string) (string, error) {
	return os.MkdirTemp(ws.Root(), prefix+"-*")
}
