package harness

import (
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
// EVALFLOW_ANSWER_FILE, EVALFLOW_MAX_TURNS and EVALFLOW_WORKDIR.
func Env(parent []string, spec Spec, workdir string) []string {
	env := make([]string, 0, len(parent)+12+len(spec.Env))
	for _, kv := range parent {
		name, _, _ := strings.Cut(kv, "=")
		if name == "" || IsSecretName(name) {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"OPENAI_BASE_URL="+spec.BaseURL+"/v1",
		"OPENAI_API_KEY="+spec.Secret,
		"OPENAI_MODEL="+spec.Model,
		"ANTHROPIC_BASE_URL="+spec.BaseURL,
		"ANTHROPIC_API_KEY="+spec.Secret,
		"ANTHROPIC_MODEL="+spec.Model,
		"EVALFLOW_TASK_FILE="+filepath.Join(workdir, TaskFile),
		"EVALFLOW_PROMPT="+Prompt(spec.Task),
		"EVALFLOW_ANSWER_FILE="+filepath.Join(workdir, AnswerFile),
		"EVALFLOW_MAX_TURNS="+strconv.Itoa(spec.MaxTurns),
		"EVALFLOW_WORKDIR="+workdir,
	)
	env = append(env, spec.Env...)
	return dedupEnv(env)
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
