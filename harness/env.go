package harness

import (
	"path"
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
// os.Environ()) without any variable IsSecretName matches, then the contract
// variables, then spec.Env; a later entry replaces an earlier one of the same
// name. workdir is the rollout's working directory as the harness sees it.
//
// The contract: OPENAI_BASE_URL={BaseURL}/v1, ANTHROPIC_BASE_URL={BaseURL},
// OPENAI_API_KEY and ANTHROPIC_API_KEY = the rollout secret, OPENAI_MODEL and
// ANTHROPIC_MODEL = the model, EVALFLOW_TASK_FILE, EVALFLOW_PROMPT,
// EVALFLOW_ANSWER_FILE, EVALFLOW_MAX_TURNS and EVALFLOW_WORKDIR,
// EVALFLOW_BASE_URL={BaseURL}, EVALFLOW_STATE_URL={BaseURL}/state and
// EVALFLOW_TASK_URL={BaseURL}/task for the task's tool servers and user
// (tools.go) with EVALFLOW_ROLLOUT_SECRET (the rollout secret again) when
// the task has any, and EVALFLOW_SOLUTION when spec.Solution is set (the oracle's).
func Env(parent []string, spec Spec, workdir string) []string {
	return contractEnv(parent, spec, envPaths{workdir: workdir, files: workdir, solution: spec.Solution})
}

// envPaths are the paths of a run as its harness sees them (on the host,
// or inside a sandbox).
type envPaths struct {
	workdir string // EVALFLOW_WORKDIR: the harness's working directory
	files   string // the directory of task.json and answer.txt
	// With a workspace: EVALFLOW_WORKSPACE, EVALFLOW_LOGS and the
	// Dockerfile's ENV; empty without one.
	workspace, logs string
	wsEnv           []string
	solution        string // EVALFLOW_SOLUTION, when set
	home            string // HOME, when set
}

// contractEnv is Env for the paths p: the parent without credentials, the
// workspace's Dockerfile ENV, the contract variables, then spec.Env.
func contractEnv(parent []string, spec Spec, p envPaths) []string {
	env := make([]string, 0, len(parent)+16+len(p.wsEnv)+len(spec.Env))
	env = appendInherited(env, parent)
	env = append(env, p.wsEnv...)
	env = append(env,
		"OPENAI_BASE_URL="+spec.BaseURL+"/v1",
		"OPENAI_API_KEY="+spec.Secret,
		"OPENAI_MODEL="+spec.Model,
		"ANTHROPIC_BASE_URL="+spec.BaseURL,
		"ANTHROPIC_API_KEY="+spec.Secret,
		"ANTHROPIC_MODEL="+spec.Model,
		"EVALFLOW_TASK_FILE="+path.Join(p.files, TaskFile),
		"EVALFLOW_PROMPT="+Prompt(spec.Task),
		"EVALFLOW_ANSWER_FILE="+path.Join(p.files, AnswerFile),
		"EVALFLOW_MAX_TURNS="+strconv.Itoa(spec.MaxTurns),
		"EVALFLOW_WORKDIR="+p.workdir,
		"EVALFLOW_BASE_URL="+spec.BaseURL,
		"EVALFLOW_STATE_URL="+spec.BaseURL+"/state",
		"EVALFLOW_TASK_URL="+spec.BaseURL+"/task",
	)
	if len(spec.Task.Tools) > 0 || spec.Task.User != nil {
		// For the task's tool servers and user, which the harness starts.
		env = append(env, RolloutSecretEnv+"="+spec.Secret)
	}
	if p.workspace != "" {
		env = append(env, "EVALFLOW_WORKSPACE="+p.workspace, "EVALFLOW_LOGS="+p.logs)
	}
	if p.solution != "" {
		env = append(env, "EVALFLOW_SOLUTION="+p.solution)
	}
	if p.home != "" {
		env = append(env, "HOME="+p.home)
	}
	env = append(env, spec.Env...)
	return dedupEnv(env)
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
