package harness

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/evalflow/evalflow/tasksets"
)

// TaskChecker is a runtime that cannot run every task: CheckTask returns a
// *ConfigError saying why it refuses task, nil when it can run it. A run's
// start checks its tasks with it, so that a task the runtime cannot honour
// stops the run, named, before any rollout is scored.
type TaskChecker interface {
	CheckTask(task tasksets.Task) error
}

// CheckerOf is the TaskChecker of rt, looking through wrappers.
func CheckerOf(rt Runtime) (TaskChecker, bool) {
	for rt != nil {
		if c, ok := rt.(TaskChecker); ok {
			return c, true
		}
		u, ok := rt.(Wrapper)
		if !ok {
			return nil, false
		}
		rt = u.Unwrap()
	}
	return nil, false
}

var (
	_ TaskChecker = (*Local)(nil)
	_ TaskChecker = (*Netns)(nil)
	_ TaskChecker = (*Bwrap)(nil)
	_ TaskChecker = (*Auto)(nil)
)

// CheckTask refuses a task whose own scripts assume the paths of a sandbox
// (see sandboxPaths): run on this host's files, they would find none of
// them; and one that asks for a separate verifier.
func (l *Local) CheckTask(task tasksets.Task) error {
	if err := refuseSeparate(task, "local"); err != nil {
		return err
	}
	return checkHostPaths(task, "local")
}

// CheckTask refuses what Local refuses: the namespace sees the host's files.
func (n *Netns) CheckTask(task tasksets.Task) error {
	if err := refuseSeparate(task, "netns"); err != nil {
		return err
	}
	return checkHostPaths(task, "netns")
}

// CheckTask refuses a task that asks for a separate verifier: a bubblewrap
// sandbox is the host's system, not a fresh one of the verifier's.
func (b *Bwrap) CheckTask(task tasksets.Task) error { return refuseSeparate(task, "bwrap") }

// CheckTask checks a task in the runtime it runs in: a task with an
// environment goes to a sandbox, which honours its paths; the others run
// locally.
func (a *Auto) CheckTask(task tasksets.Task) error {
	rt, err := a.forTask(task)
	if err != nil {
		return err
	}
	if c, ok := rt.(TaskChecker); ok {
		return c.CheckTask(task)
	}
	return nil
}

// HostPathsError is a task a runtime on this host's files (local, netns)
// cannot give what it assumes: its scripts use the absolute paths a sandbox
// has (/app, /tests, /logs, /solution, its Dockerfile's WORKDIR), where
// this host has nothing of the task's.
type HostPathsError struct {
	Task    string
	Runtime string
	// Workdir is the task's Dockerfile WORKDIR, "" when it has none.
	Workdir string
	// Uses are where the task names such paths, the first few.
	Uses []PathUse
}

// PathUse is one place a task names a sandbox path.
type PathUse struct {
	File string // relative to the task's directory ("solution/solve.sh"), or "verify command"
	Line int
	Path string // the path as named, e.g. /app/hello.txt
}

func (u PathUse) String() string {
	if u.Line == 0 {
		return fmt.Sprintf("%s: %s", u.File, u.Path)
	}
	return fmt.Sprintf("%s line %d: %s", u.File, u.Line, u.Path)
}

func (e *HostPathsError) Error() string {
	uses := make([]string, len(e.Uses))
	for i, u := range e.Uses {
		uses[i] = u.String()
	}
	workdir := ""
	if e.Workdir != "" {
		workdir = fmt.Sprintf(" (its Dockerfile's WORKDIR is %s)", e.Workdir)
	}
	return fmt.Sprintf("task %s assumes the paths of a sandbox%s: %s; the %s runtime runs it in a directory of this host, where they hold nothing of the task's. "+
		"Run it with --runtime bwrap or --runtime docker (the default, auto, picks one of them for a task with an environment), "+
		"or write its scripts against $EVALFLOW_WORKSPACE, $EVALFLOW_TESTS, $EVALFLOW_LOGS and $EVALFLOW_SOLUTION",
		e.Task, workdir, strings.Join(uses, "; "), e.Runtime)
}

// sandboxPaths are the absolute paths a sandbox gives a task and this
// host does not: the workspace, the tests, the logs, the solution.
var sandboxPaths = []string{DefaultMount, sandboxTests, sandboxLogs, sandboxSolution}

// Bounds of what checkHostPaths reads of a task's files.
const (
	maxUses       = 5
	maxCheckFiles = 200
	maxCheckSize  = 256 << 10
)

// checkHostPaths returns a *ConfigError wrapping a *HostPathsError when the
// task's own scripts — its solution's and its tests' files, its verify
// command — name a sandbox path. A path given only as the default of a
// variable (${EVALFLOW_WORKSPACE:-/app}) or in a comment does not count;
// nor does /tests in the verify command, which the host runtimes rewrite.
func checkHostPaths(task tasksets.Task, runtime string) error {
	workdir := dockerfileWorkdir(task)
	paths := sandboxPaths
	if workdir != "" && workdir != DefaultMount && !strings.HasPrefix(workdir, DefaultMount+"/") && workdir != "/" {
		paths = append(append([]string(nil), paths...), workdir)
	}
	var uses []PathUse
	add := func(file string, found []PathUse) {
		for _, u := range found {
			if len(uses) < maxUses {
				u.File = file
				uses = append(uses, u)
			}
		}
	}
	if task.Verify != "" {
		var rest []string
		for _, p := range paths {
			if p != sandboxTests {
				rest = append(rest, p)
			}
		}
		add("verify command", scanPaths([]byte(task.Verify), rest))
		for i := range uses {
			uses[i].Line = 0
		}
	}
	root := taskRoot(task)
	files := 0
	for _, dir := range []string{task.Solution, task.Tests} {
		if dir == "" {
			continue
		}
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || len(uses) >= maxUses || files >= maxCheckFiles {
				return fs.SkipDir
			}
			if !d.Type().IsRegular() {
				return nil
			}
			files++
			info, err := d.Info()
			if err != nil || info.Size() > maxCheckSize {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil || bytes.IndexByte(b, 0) >= 0 {
				return nil // unreadable or binary: nothing to say
			}
			name := p
			if rel, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(rel, "..") {
				name = filepath.ToSlash(rel)
			}
			add(name, scanPaths(b, paths))
			return nil
		})
	}
	if len(uses) == 0 {
		return nil
	}
	return &ConfigError{Err: &HostPathsError{Task: task.ID, Runtime: runtime, Workdir: workdir, Uses: uses}}
}

// taskRoot is the directory a task's files are named relative to: the
// parent of its solution or tests directory.
func taskRoot(task tasksets.Task) string {
	for _, d := range []string{task.Solution, task.Tests, task.Environment} {
		if d != "" {
			return filepath.Dir(filepath.Clean(d))
		}
	}
	return ""
}

// dockerfileWorkdir is the final WORKDIR of the task's Dockerfile, "" when
// it has none (or none can be read: preparing the workspace says why).
func dockerfileWorkdir(task tasksets.Task) string {
	if task.Environment == "" {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(task.Environment, "Dockerfile"))
	if err != nil {
		return ""
	}
	ins, err := parseDockerfile(b)
	if err != nil {
		return ""
	}
	for _, in := range ins {
		if in.cmd == "WORKDIR" {
			plan, err := planDockerfile(ins, workerLookup)
			if err != nil {
				return ""
			}
			return path.Clean(plan.workdir)
		}
	}
	return ""
}

var (
	// defaultExpansion is ${NAME:-default} or ${NAME-default} (and :=, =):
	// the default is used only when the variable is unset, and the host
	// runtimes set theirs.
	defaultExpansion = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*:?[-=][^}]*\}`)
	// trailingComment is a shell or Python comment after code.
	trailingComment = regexp.MustCompile(`\s#.*$`)
	// envFallback is a line reading an EVALFLOW_ variable with a fallback
	// (os.environ.get("EVALFLOW_WORKSPACE", "/app"), getenv(…)).
	envFallback = regexp.MustCompile(`(environ|getenv|ENV\[).*EVALFLOW_`)
)

// scanPaths finds the sandbox paths among paths that text names as paths
// of their own, one a line, skipping comments and variable defaults.
func scanPaths(text []byte, paths []string) []PathUse {
	if len(paths) == 0 {
		return nil
	}
	alts := make([]string, len(paths))
	for i, p := range paths {
		alts[i] = regexp.QuoteMeta(p)
	}
	re := regexp.MustCompile(`(?:^|[\s'"=:(<>;|&,\[])((?:` + strings.Join(alts, "|") + `)(?:/[^\s'"();|&<>,\]]*)?)(?:$|[\s'"();|&<>,\]])`)
	var out []PathUse
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), maxCheckSize)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") || strings.HasPrefix(t, "//") {
			continue
		}
		if envFallback.MatchString(line) {
			continue
		}
		line = trailingComment.ReplaceAllString(defaultExpansion.ReplaceAllString(line, ""), "")
		if m := re.FindStringSubmatch(line); m != nil {
			out = append(out, PathUse{Line: n, Path: m[1]})
		}
	}
	return out
}
