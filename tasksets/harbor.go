package tasksets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// Files and directories of a task directory in the Harbor layout (the one
// Terminal-Bench uses).
const (
	HarborConfig      = "task.toml"
	HarborInstruction = "instruction.md"
	HarborEnvironment = "environment"
	HarborTests       = "tests"
	HarborTestScript  = "test.sh"
	HarborSolution    = "solution"
	// HarborVerify is the verifier command of every Harbor task.
	HarborVerify = "bash /tests/test.sh"
)

// harborFileLimit bounds task.toml and instruction.md.
const harborFileLimit = 4 << 20

// Harbor is a directory of task directories in the Harbor layout:
//
//	task-name/
//	  instruction.md     the prompt (required, not empty)
//	  task.toml          [metadata], [agent], [verifier], [environment] (required);
//	                     [[tools]] and [user] as in JSONL (tools.go)
//	  environment/       Dockerfile and build context, or plain files (optional)
//	  tests/test.sh      the verifier, run as "bash /tests/test.sh" (required)
//	  solution/solve.sh  the reference solution, for the oracle (optional)
//
// Tasks are ordered by directory name. Opening validates every task once;
// Task(i) reads only task i's files. It is safe for concurrent use.
type Harbor struct {
	root  string
	names []string
	// dirs are the tasks' directories when they do not all sit in root
	// (a registry's tasks, each in its repository's checkout).
	dirs []string
}

var _ Taskset = (*Harbor)(nil)

// OpenHarbor opens the Harbor taskset in dir. Every entry of dir that is a
// directory (or a link to one) is a task, except hidden ones; other regular
// files (a README) are ignored, and special files (FIFOs, devices, sockets)
// are refused. Opening checks every task — task.toml parses and its values
// have the right types, instruction.md is a non-empty regular file,
// tests/test.sh is a regular file — and refuses with one error naming every
// bad task by its directory name and what is wrong with it. Errors never
// quote the files' content.
func OpenHarbor(dir string) (*Harbor, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open taskset: %w", err)
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("open taskset: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("open taskset: %s is %s, not a directory of tasks", root, DescribeMode(fi.Mode()))
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("open taskset: %w", err)
	}
	h := &Harbor{root: root}
	var bad []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		fi, err := os.Stat(filepath.Join(root, name))
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("%s: %v", name, errors.Unwrap(err)))
			continue
		case fi.Mode().IsRegular():
			continue
		case !fi.IsDir():
			bad = append(bad, fmt.Sprintf("%s: %s, not a task directory", name, DescribeMode(fi.Mode())))
			continue
		}
		if _, err := h.load(name, filepath.Join(root, name)); err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		h.names = append(h.names, name)
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return nil, fmt.Errorf("open taskset %s: %d bad task(s): %s", root, len(bad), strings.Join(bad, "; "))
	}
	if len(h.names) == 0 {
		return nil, fmt.Errorf("open taskset %s: no task directories", root)
	}
	sort.Strings(h.names)
	return h, nil
}

// Dir is the taskset's directory, absolute.
func (h *Harbor) Dir() string { return h.root }

// Len is the number of tasks.
func (h *Harbor) Len() int64 { return int64(len(h.names)) }

// Task reads task i's directory.
func (h *Harbor) Task(ctx context.Context, i int64) (Task, error) {
	if err := ctx.Err(); err != nil {
		return Task{}, err
	}
	if i < 0 || i >= int64(len(h.names)) {
		return Task{}, fmt.Errorf("%s: task %d out of range [0, %d)", h.root, i, len(h.names))
	}
	name := h.names[i]
	t, err := h.load(name, h.dir(int(i)))
	if err != nil {
		// The directory changed after the taskset was opened.
		return Task{}, fmt.Errorf("%s: task %s: %w", h.root, name, err)
	}
	return t, nil
}

// dir is task i's directory.
func (h *Harbor) dir(i int) string {
	if h.dirs != nil {
		return h.dirs[i]
	}
	return filepath.Join(h.root, h.names[i])
}

// load reads and checks the task directory dir, whose task is called name.
// A multi-step task ([[steps]] in task.toml) takes its instructions from
// steps/; its own instruction.md and tests/ are then optional.
func (h *Harbor) load(name, dir string) (Task, error) {
	var problems []string
	t := Task{ID: name, Verify: HarborVerify}
	testsErr := regularFile(filepath.Join(dir, HarborTests, HarborTestScript))
	if testsErr == nil {
		t.Tests = filepath.Join(dir, HarborTests)
	}
	config, err := readSmall(filepath.Join(dir, HarborConfig))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		problems = append(problems, HarborConfig+" is missing")
	case err != nil:
		problems = append(problems, HarborConfig+": "+err.Error())
	default:
		if err := parseHarborConfig(config, dir, &t); err != nil {
			problems = append(problems, HarborConfig+": "+err.Error())
		}
	}
	multi := len(t.Steps) > 0
	instruction, err := readSmall(filepath.Join(dir, HarborInstruction))
	switch {
	case errors.Is(err, fs.ErrNotExist) && multi:
	case errors.Is(err, fs.ErrNotExist):
		problems = append(problems, HarborInstruction+" is missing")
	case err != nil:
		problems = append(problems, HarborInstruction+": "+err.Error())
	case strings.TrimSpace(string(instruction)) == "" && !multi:
		problems = append(problems, HarborInstruction+" is empty")
	}
	t.Prompt = string(instruction)
	if multi {
		// The agent is given each step's instruction in turn; the task's
		// own, when there is one, is never sent (as in Harbor).
		t.Prompt = t.Steps[0].Prompt
	}
	switch {
	case testsErr == nil, multi && errors.Is(testsErr, fs.ErrNotExist):
	case errors.Is(testsErr, fs.ErrNotExist):
		problems = append(problems, HarborTests+"/"+HarborTestScript+" is missing")
	default:
		problems = append(problems, HarborTests+"/"+HarborTestScript+" is "+testsErr.Error())
	}
	for _, opt := range []struct {
		sub string
		dst *string
	}{{HarborEnvironment, &t.Environment}, {HarborSolution, &t.Solution}} {
		fi, err := os.Stat(filepath.Join(dir, opt.sub))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			problems = append(problems, opt.sub+": "+fileProblem("", err).Error())
		case !fi.IsDir():
			problems = append(problems, opt.sub+" is "+DescribeMode(fi.Mode())+", not a directory")
		default:
			*opt.dst = filepath.Join(dir, opt.sub)
		}
	}
	if len(problems) > 0 {
		return Task{}, errors.New(strings.Join(problems, ", "))
	}
	return t, nil
}

// regularFile is nil for a regular file at path, an error wrapping
// fs.ErrNotExist for none, else one that says what is there instead.
func regularFile(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return fs.ErrNotExist
	case !fi.Mode().IsRegular():
		return errors.New(DescribeMode(fi.Mode()) + ", not a regular file")
	}
	return nil
}

// readSmall reads a regular file of at most harborFileLimit bytes. Its
// errors, but for fs.ErrNotExist, say what is wrong without the path (the
// caller names the file).
func readSmall(path string) ([]byte, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, fileProblem(path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, harborFileLimit+1))
	if err != nil {
		return nil, fileProblem(path, err)
	}
	if len(b) > harborFileLimit {
		return nil, fmt.Errorf("larger than %d MiB", harborFileLimit>>20)
	}
	return b, nil
}

// fileProblem is err without path.
func fileProblem(path string, err error) error {
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return err
	case errors.As(err, &pe):
		return pe.Err
	case errors.Is(err, ErrNotRegular):
		return errors.New(strings.TrimPrefix(err.Error(), path+" "))
	}
	return err
}

// parseHarborConfig reads task.toml into t: timeouts and the verifier's
// environment into their fields, [[steps]] with the files of steps/ in
// dir (harbor_steps.go), everything else (metadata, environment, task,
// keys of its own) into Info as JSON. [verifier.env] stays out of
// Info, which the agent sees; [[tools]] and [user] go to their fields.
func parseHarborConfig(data []byte, dir string, t *Task) error {
	doc := map[string]any{}
	if err := toml.Unmarshal(data, &doc); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return fmt.Errorf("line %d, column %d: invalid TOML", row, col)
		}
		return errors.New("invalid TOML")
	}
	var err error
	if t.AgentTimeout, err = timeoutSec(doc, "agent"); err != nil {
		return err
	}
	if t.VerifierTimeout, err = timeoutSec(doc, "verifier"); err != nil {
		return err
	}
	if v, ok := doc["verifier"].(map[string]any); ok {
		if raw, ok := v["env"]; ok {
			env, ok := raw.(map[string]any)
			if !ok {
				return errors.New("[verifier] env must be a table of strings")
			}
			t.VerifierEnv = make(map[string]string, len(env))
			for k, val := range env {
				s, ok := val.(string)
				if !ok {
					return errors.New("[verifier.env] values must be strings")
				}
				t.VerifierEnv[k] = s
			}
			if len(t.VerifierEnv) == 0 {
				t.VerifierEnv = nil
			}
			delete(v, "env")
		}
	}
	if err := toolsFromTOML(doc, t); err != nil {
		return err
	}
	if err := checkHarborKeys(doc, t); err != nil {
		return err
	}
	if problems := loadSteps(doc, dir, t); len(problems) > 0 {
		return errors.New(strings.Join(problems, ", "))
	}
	for _, table := range []string{"metadata", "environment", "task"} {
		if v, ok := doc[table]; ok {
			if _, ok := v.(map[string]any); !ok {
				return fmt.Errorf("%s must be a table", table)
			}
		}
	}
	if len(doc) > 0 {
		info, err := json.Marshal(doc)
		if err != nil {
			return fmt.Errorf("cannot keep as JSON: %w", err)
		}
		t.Info = info
	}
	return nil
}

// timeoutSec reads [table] timeout_sec, a number of seconds >= 0; absent is 0.
func timeoutSec(doc map[string]any, table string) (time.Duration, error) {
	raw, ok := doc[table]
	if !ok {
		return 0, nil
	}
	tab, ok := raw.(map[string]any)
	if !ok {
		return 0, fmt.Errorf("%s must be a table", table)
	}
	v, ok := tab["timeout_sec"]
	if !ok {
		return 0, nil
	}
	var sec float64
	switch n := v.(type) {
	case int64:
		sec = float64(n)
	case float64:
		sec = n
	default:
		return 0, fmt.Errorf("[%s] timeout_sec must be a number", table)
	}
	return seconds(sec, "["+table+"] timeout_sec")
}

// seconds converts a non-negative, finite number of seconds.
func seconds(sec float64, what string) (time.Duration, error) {
	if math.IsNaN(sec) || sec < 0 || sec > float64(math.MaxInt64/int64(time.Second)) {
		return 0, fmt.Errorf("%s must be a number of seconds from 0", what)
	}
	return time.Duration(sec * float64(time.Second)), nil
}
