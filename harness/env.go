package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/evalflow/evalflow/tasksets"
)

// Files a harness finds in (or writes to) its workdir.
const (
	// TaskFile holds the task as JSON (EVALFLOW_TASK_FILE).
	TaskFile = "task.json"
	// AnswerFile is where a harness may write its final answer (EVALFLOW_ANSWER_FILE).
	AnswerFile = "answer.txt"
)

// RolloutSecretEnv holds the rollout's secret for the task's tool servers
// and user, in a harness's environment when its task has any.
const RolloutSecretEnv = "EVALFLOW_ROLLOUT_SECRET"

// secretSuffixes name the variables a harness must not inherit from the worker:
// the worker's real provider credentials and anything else that looks like one.
var secretSuffixes = []string{"_API_KEY", "_TOKEN", "_SECRET", "_SECRET_KEY", "_ACCESS_KEY", "_PASSWORD"}

// IsSecretName reports whether an environment variable name looks like a
// credential (OPENAI_API_KEY, GITHUB_TOKEN, CLIENT_SECRET, ...). Such variables
// of the worker are never passed to a harness.
func IsSecretName(name string) bool {
	upper := strings.ToUpper(name)
	if upper == "API_KEY" {
		return true
	}
	for _, s := range secretSuffixes {
		if strings.HasSuffix(upper, s) {
			return true
		}
	}
	return false
}

// Env builds the environment of a harness process. It is parent (usually
// os.Environ(); nil in a sandbox, whose image supplies the rest) without
// any variable IsSecretName matches, then the workspace's Dockerfile ENV,
// then the contract variables for the paths p, then spec.Env; a later entry
// replaces an earlier one of the same name.
//
// The contract: OPENAI_BASE_URL={BaseURL}/v1, ANTHROPIC_BASE_URL={BaseURL},
// OPENAI_API_KEY and ANTHROPIC_API_KEY = the rollout secret, OPENAI_MODEL and
// ANTHROPIC_MODEL = the model, EVALFLOW_TASK_FILE, EVALFLOW_PROMPT,
// EVALFLOW_ANSWER_FILE, EVALFLOW_MAX_TURNS and EVALFLOW_WORKDIR,
// EVALFLOW_BASE_URL={BaseURL}, EVALFLOW_STATE_URL={BaseURL}/state and
// EVALFLOW_TASK_URL={BaseURL}/task for the task's tool servers and user
// (tools.go) with EVALFLOW_ROLLOUT_SECRET (the rollout secret again) when
// the task has any, EVALFLOW_WORKSPACE and EVALFLOW_LOGS with a workspace,
// and EVALFLOW_SOLUTION when p.Solution is set (the oracle's).
func Env(parent []string, spec Spec, p Paths) []string {
	env := make([]string, 0, len(parent)+16+len(p.WorkspaceEnv)+len(spec.Env))
	env = appendInherited(env, parent)
	env = append(env, p.WorkspaceEnv...)
	env = append(env,
		"OPENAI_BASE_URL="+spec.BaseURL+"/v1",
		"OPENAI_API_KEY="+spec.Secret,
		"OPENAI_MODEL="+spec.Model,
		"ANTHROPIC_BASE_URL="+spec.BaseURL,
		"ANTHROPIC_API_KEY="+spec.Secret,
		"ANTHROPIC_MODEL="+spec.Model,
		"EVALFLOW_TASK_FILE="+path.Join(p.Files, TaskFile),
		"EVALFLOW_PROMPT="+Prompt(spec.Task),
		"EVALFLOW_ANSWER_FILE="+path.Join(p.Files, AnswerFile),
		"EVALFLOW_MAX_TURNS="+strconv.Itoa(spec.MaxTurns),
		"EVALFLOW_WORKDIR="+p.Workdir,
		"EVALFLOW_BASE_URL="+spec.BaseURL,
		"EVALFLOW_STATE_URL="+spec.BaseURL+"/state",
		"EVALFLOW_TASK_URL="+spec.BaseURL+"/task",
	)
	if len(spec.Task.Tools) > 0 || spec.Task.User != nil {
		// For the task's tool servers and user, which the harness starts.
		env = append(env, RolloutSecretEnv+"="+spec.Secret)
	}
	if p.Workspace != "" {
		env = append(env, "EVALFLOW_WORKSPACE="+p.Workspace, "EVALFLOW_LOGS="+p.Logs)
	}
	if p.Solution != "" {
		env = append(env, "EVALFLOW_SOLUTION="+p.Solution)
	}
	if p.Home != "" {
		env = append(env, "HOME="+p.Home)
	}
	env = append(env, spec.Env...)
	return dedupEnv(env)
}

// Paths are where a harness finds its files, as it sees them (on this
// host, or inside a sandbox).
type Paths struct {
	Workdir string // EVALFLOW_WORKDIR: the harness's working directory
	Files   string // the directory of task.json and answer.txt
	// With a workspace: EVALFLOW_WORKSPACE, EVALFLOW_LOGS and the
	// Dockerfile's ENV; empty without one.
	Workspace, Logs string
	WorkspaceEnv    []string
	Solution        string // EVALFLOW_SOLUTION, when set
	Home            string // HOME, when set
}

// WriteTaskFile writes the task, as the harness may see it, to
// dir/task.json.
func WriteTaskFile(dir string, t tasksets.Task) error {
	task, err := json.Marshal(t.ForHarness())
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, TaskFile), task, 0o644)
	}
	if err != nil {
		return fmt.Errorf("write task file: %w", err)
	}
	return nil
}

// answerLimit bounds how much of the answer file is read.
const answerLimit = 1 << 20

// ReadAnswer returns the trimmed answer a harness wrote to path, or ""
// when it wrote none. An unreadable answer is the harness's fault and
// reads as no answer.
func ReadAnswer(path string) string {
	// Only a regular file: a FIFO would block the worker, a symlink could
	// point anywhere.
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, answerLimit))
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}

// appendInherited appends the entries of parent that are not credentials.
func appendInherited(env, parent []string) []string {
	for _, kv := range parent {
		name, _, _ := strings.Cut(kv, "=")
		if name == "" || IsSecretName(name) {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// Prompt is the text a harness is asked to solve: the task's prompt, or else
// the content of its last user message.
func Prompt(t tasksets.Task) string {
	if t.Prompt != "" {
		return t.Prompt
	}
	for i := len(t.Messages) - 1; i >= 0; i-- {
		if t.Messages[i].Role == "user" {
			return t.Messages[i].Content
		}
	}
	return ""
}

// dedupEnv keeps the last value of each name, at the position of its first
// occurrence, so the result does not depend on how exec treats duplicates.
func dedupEnv(env []string) []string {
	last := make(map[string]int, len(env))
	for i, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		last[name] = i
	}
	out := make([]string, 0, len(last))
	seen := make(map[string]bool, len(last))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, env[last[name]])
	}
	return out
}
