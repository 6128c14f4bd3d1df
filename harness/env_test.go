package harness

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/tasksets"
)

func envMap(t *testing.T, env []string) map[string]string {
	t.Helper()
	m := make(map[string]string, len(env))
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		require.True(t, ok, "env entry %q has no '='", kv)
		_, dup := m[name]
		require.False(t, dup, "env has %s twice", name)
		m[name] = value
	}
	return m
}

func TestEnv(t *testing.T) {
	parent := []string{
		"PATH=/usr/bin",
		"HOME=/home/w",
		"OPENAI_API_KEY=sk-worker-real",
		"ANTHROPIC_API_KEY=ant-worker-real",
		"GITHUB_TOKEN=ghp-worker",
		"AWS_SECRET_ACCESS_KEY=aws-worker",
		"OPENAI_BASE_URL=https://api.openai.com/v1",
		"EVALFLOW_PROMPT=stale",
	}
	spec := Spec{
		BaseURL:  "http://127.0.0.1:4000",
		Secret:   "rollout-secret",
		Model:    "gpt-test",
		MaxTurns: 7,
		Task:     tasksets.Task{ID: "t1", Prompt: "add 2 and 2"},
		Env:      []string{"EXTRA=1", "OPENAI_MODEL=override"},
	}
	got := envMap(t, Env(parent, spec, Paths{Workdir: "/w/r1", Files: "/w/r1"}))

	want := map[string]string{
		"PATH":                 "/usr/bin",
		"HOME":                 "/home/w",
		"OPENAI_BASE_URL":      "http://127.0.0.1:4000/v1",
		"OPENAI_API_KEY":       "rollout-secret",
		"OPENAI_MODEL":         "override",
		"ANTHROPIC_BASE_URL":   "http://127.0.0.1:4000",
		"ANTHROPIC_API_KEY":    "rollout-secret",
		"ANTHROPIC_MODEL":      "gpt-test",
		"EVALFLOW_TASK_FILE":   "/w/r1/task.json",
		"EVALFLOW_PROMPT":      "add 2 and 2",
		"EVALFLOW_ANSWER_FILE": "/w/r1/answer.txt",
		"EVALFLOW_MAX_TURNS":   "7",
		"EVALFLOW_WORKDIR":     "/w/r1",
		"EVALFLOW_BASE_URL":    "http://127.0.0.1:4000",
		"EVALFLOW_STATE_URL":   "http://127.0.0.1:4000/state",
		"EVALFLOW_TASK_URL":    "http://127.0.0.1:4000/task",
		"EXTRA":                "1",
	}
	assert.Equal(t, want, got)

	spec.Task.Tools = []tasksets.ToolServer{{Name: "counter", Command: []string{"counter"}}}
	got = envMap(t, Env(parent, spec, Paths{Workdir: "/w/r1", Files: "/w/r1"}))
	assert.Equal(t, "rollout-secret", got[RolloutSecretEnv], "a task with tool servers: their secret")
}

func TestIsSecretName(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"OPENAI_API_KEY", true},
		{"ANTHROPIC_API_KEY", true},
		{"GROQ_API_KEY", true},
		{"GITHUB_TOKEN", true},
		{"HF_TOKEN", true},
		{"CLIENT_SECRET", true},
		{"AWS_SECRET_ACCESS_KEY", true},
		{"PGPASSWORD", false},
		{"POSTGRES_PASSWORD", true},
		{"api_key", true},
		{"PATH", false},
		{"OPENAI_BASE_URL", false},
		{"TOKENIZERS_PARALLELISM", false},
		{"EVALFLOW_MAX_TURNS", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, IsSecretName(tt.name), "IsSecretName(%q)", tt.name)
	}
}

func TestPrompt(t *testing.T) {
	tests := []struct {
		name string
		task tasksets.Task
		want string
	}{
		{"prompt wins", tasksets.Task{Prompt: "p", Messages: []tasksets.Message{{Role: "user", Content: "m"}}}, "p"},
		{"last user message", tasksets.Task{Messages: []tasksets.Message{
			{Role: "system", Content: "sys"},
			{Role: "user", Content: "first"},
			{Role: "assistant", Content: "a"},
			{Role: "user", Content: "second"},
			{Role: "assistant", Content: "b"},
		}}, "second"},
		{"no user message", tasksets.Task{Messages: []tasksets.Message{{Role: "system", Content: "sys"}}}, ""},
		{"empty", tasksets.Task{}, ""},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Prompt(tt.task), "Prompt(%s)", tt.name)
	}
}
