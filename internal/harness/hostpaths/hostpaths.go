// Package hostpaths finds what keeps a task from running on this host's
// files (the local and netns runtimes): its own scripts naming the
// absolute paths a sandbox gives it (/app, /tests, /logs, /solution, its
// Dockerfile's WORKDIR), where this host holds nothing of the task's.
package hostpaths

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

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/dockerfile"
	"github.com/evalflow/evalflow/tasksets"
)

// Error is a task a runtime on this host's files (local, netns) cannot
// give what it assumes: its scripts use the absolute paths a sandbox has
// (/app, /tests, /logs, /solution, its Dockerfile's WORKDIR), where this
// host has nothing of the task's.
type Error struct {
	Task    string
	Runtime string
	// Workdir is the task's Dockerfile WORKDIR, "" when it has none.
	Workdir string
	// Uses are where the task names such paths, the first few.
	Uses []Use
}

// Use is one place a task names a sandbox path.
type Use struct {
	File string // relative to the task's directory ("solution/solve.sh"), or "verify command"
	Line int
	Path string // the path as named, e.g. /app/hello.txt
}

func (u Use) String() string {
	if u.Line == 0 {
		return fmt.Sprintf("%s: %s", u.File, u.Path)
	}
	return fmt.Sprintf("%s line %d: %s", u.File, u.Line, u.Path)
}

func (e *Error) Error() string {
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

// The paths of a sandbox that a task's verify command may name, rewritten
// on this host.
const tests = "/tests"

// sandboxPaths are the absolute paths a sandbox gives a task and this
// host does not: the workspace, the tests, the logs, the solution.
var sandboxPaths = []string{harness.DefaultMount, tests, "/logs", "/solution"}

// Bounds of what Check reads of a task's files.
const (
	maxUses       = 5
	maxCheckFiles = 200
	maxCheckSize  = 256 << 10
)

// Check returns a *harness.ConfigError wrapping an *Error when the
// task's own scripts — its solution's and its tests' files, its verify
// command — name a sandbox path. A path given only as the default of a
// variable (${EVALFLOW_WORKSPACE:-/app}) or in a comment does not count;
// nor does /tests in the verify command, which the host runtimes rewrite.
// runtime names the runtime that refuses it.
func Check(task tasksets.Task, runtime string) error {
	workdir := dockerfileWorkdir(task)
	paths := sandboxPaths
	if workdir != "" && workdir != harness.DefaultMount && !strings.HasPrefix(workdir, harness.DefaultMount+"/") && workdir != "/" {
		paths = append(append([]string(nil), paths...), workdir)
	}
	var uses []Use
	add := func(file string, found []Use) {
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
			if p != tests {
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
	return &harness.ConfigError{Err: &Error{Task: task.ID, Runtime: runtime, Workdir: workdir, Uses: uses}}
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
	ins, err := dockerfile.Parse(b)
	if err != nil {
		return ""
	}
	for _, in := range ins {
		if in.Cmd == "WORKDIR" {
			plan, err := dockerfile.Interpret(ins, workerLookup)
			if err != nil {
				return ""
			}
			return path.Clean(plan.Workdir)
		}
	}
	return ""
}

// workerLookup is the worker's environment without credentials, as a
// workspace's Dockerfile sees it.
func workerLookup(name string) string {
	if harness.IsSecretName(name) {
		return ""
	}
	return os.Getenv(name)
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
func scanPaths(text []byte, paths []string) []Use {
	if len(paths) == 0 {
		return nil
	}
	alts := make([]string, len(paths))
	for i, p := range paths {
		alts[i] = regexp.QuoteMeta(p)
	}
	re := regexp.MustCompile(`(?:^|[\s'"=:(<>;|&,\[])((?:` + strings.Join(alts, "|") + `)(?:/[^\s'"();|&<>,\]]*)?)(?:$|[\s'"();|&<>,\]])`)
	var out []Use
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
			out = append(out, Use{Line: n, Path: m[1]})
		}
	}
	return out
}
