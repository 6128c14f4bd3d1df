package rubrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/tasksets"
)

func TestCompileCommand(t *testing.T) {
	tests := []struct {
		spec    string
		line    string
		timeout time.Duration
		weight  float64
	}{
		{"command:./check.sh", "./check.sh", DefaultCommandTimeout, 1},
		{"exact*0.5+command:./check.sh*0.5", "./check.sh", DefaultCommandTimeout, 0.5},
		{"command?timeout=30s:./check.sh + exact", "./check.sh", 30 * time.Second, 1},
		{"(command:python3 grade.py --strict a+b)*0.25 + exact", "python3 grade.py --strict a+b", DefaultCommandTimeout, 0.25},
		{"(command?timeout=1m:echo 1)", "echo 1", time.Minute, 1},
	}
	for _, tt := range tests {
		p, err := Compile(tt.spec)
		require.NoError(t, err, "Compile(%q)", tt.spec)
		var found bool
		for _, pt := range p.parts {
			if c, ok := pt.scorer.(command); ok {
				found = true
				assert.Equal(t, command{line: tt.line, timeout: tt.timeout}, c, "Compile(%q)", tt.spec)
				assert.Equal(t, "command", pt.name, "Compile(%q)", tt.spec)
				assert.Equal(t, tt.weight, pt.weight, "Compile(%q) weight", tt.spec)
			}
		}
		assert.True(t, found, "Compile(%q) has no command part", tt.spec)
	}

	for _, tt := range []struct{ spec, want string }{
		{"command", "command needs an argument: command:…"},
		{"command:", "command: names no program"},
		{"command?timeout=soon:./x", `command timeout "soon" is not a positive duration`},
		{"command?timeout=-1s:./x", `command timeout "-1s" is not a positive duration`},
		{"command?retries=2:./x", `command has no option "retries" (options: timeout)`},
		{"command:./a + command:./b", `two parts are named "command"; label one, as in command2=command`},
		{"grader=(command:./x)", `unknown rubric ""`},
	} {
		_, err := Compile(tt.spec)
		require.Error(t, err, "Compile(%q)", tt.spec)
		assert.Contains(t, err.Error(), tt.want, "Compile(%q)", tt.spec)
	}

	// A label is written inside the parentheses.
	p, err := Compile("(style=command:./lint.sh --strict)*0.2 + tests2=command:./check.sh*0.8")
	require.NoError(t, err)
	assert.Equal(t, "style", p.parts[0].name)
	assert.Equal(t, "tests2", p.parts[1].name)
}

// script writes an executable shell script into a temporary directory and
// returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "check.sh")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755))
	return path
}

func TestCommandScores(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		reward  float64
		metrics map[string]float64
	}{
		{"a number", "echo 0.75\n", 0.75, map[string]float64{"command": 0.75}},
		{"a number among spaces", "printf '  1\\n\\n'\n", 1, map[string]float64{"command": 1}},
		{"a JSON object with a reward", `echo '{"reward": 0.5, "lint": 3, "passed": 1}'` + "\n", 0.5,
			map[string]float64{"command": 0.5, "command.lint": 3, "command.passed": 1}},
		{"a JSON object without one: the mean", `echo '{"style": 1, "correct": 0}'` + "\n", 0.5,
			map[string]float64{"command": 0.5, "command.style": 1, "command.correct": 0}},
		{"a JSON object of the reward alone", `echo '{"reward": 1}'` + "\n", 1, map[string]float64{"command": 1}},
		{"stderr is not read", "echo noise >&2\necho 0\n", 0, map[string]float64{"command": 0}},
	}
	for _, tt := range tests {
		p, err := Compile("command:" + script(t, tt.body))
		require.NoError(t, err, tt.name)
		got, err := p.Score(context.Background(), Input{Task: verified, Answer: "42"})
		require.NoError(t, err, tt.name)
		assert.Equal(t, tt.reward, got.Reward, "%s: reward", tt.name)
		assert.Equal(t, tt.metrics, got.Metrics, "%s: metrics", tt.name)
		assert.Contains(t, got.Detail, "printed", tt.name)
	}
}

// TestCommandSees checks the command contract: the workspace, the task and
// the answer in the environment, the answer on stdin, the worker's working
// directory.
func TestCommandSees(t *testing.T) {
	out := t.TempDir()
	workspace := t.TempDir()
	body := `cp "$EVALFLOW_TASK_FILE" "$OUT/task.json"
cp "$EVALFLOW_ANSWER_FILE" "$OUT/answer.txt"
cat > "$OUT/stdin.txt"
printf '%s' "$EVALFLOW_WORKSPACE" > "$OUT/workspace"
printf '%s' "$EVALFLOW_TASK_ID" > "$OUT/id"
cp "$EVALFLOW_STATE_FILE" "$OUT/state.json"
cp "$EVALFLOW_TRANSCRIPT_FILE" "$OUT/transcript.json"
pwd > "$OUT/pwd"
echo 1
`
	t.Setenv("OUT", out)
	p, err := Compile("command:" + script(t, body))
	require.NoError(t, err)
	task := tasksets.Task{ID: "fix-bug", Prompt: "Fix it.", Answer: "42", Verify: "bash /tests/test.sh"}
	answer := "It is 42.\nSecond line."
	transcript := []Message{{Role: "user", Text: "Fix it."}, {Role: "assistant", Text: "Done?"}, {Role: "user", Text: "Check again."}}
	_, err = p.Score(context.Background(), Input{Task: task, Answer: answer, Workspace: workspace,
		State: json.RawMessage(`{"counter":3}`), Transcript: transcript})
	require.NoError(t, err)

	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(out, name))
		require.NoError(t, err, name)
		return string(b)
	}
	var gotTask tasksets.Task
	require.NoError(t, json.Unmarshal([]byte(read("task.json")), &gotTask))
	assert.Equal(t, task, gotTask)
	assert.Equal(t, answer, read("answer.txt"))
	assert.Equal(t, answer, read("stdin.txt"))
	assert.Equal(t, workspace, read("workspace"))
	assert.Equal(t, "fix-bug", read("id"))
	assert.JSONEq(t, `{"counter":3}`, read("state.json"), "the rollout's shared state")
	var gotTranscript []Message
	require.NoError(t, json.Unmarshal([]byte(read("transcript.json")), &gotTranscript))
	assert.Equal(t, transcript, gotTranscript, "the whole conversation")
	wd, err := os.Getwd()
	require.NoError(t, err)
	assert.Equal(t, wd+"\n", read("pwd"))
}

func TestCommandEnv(t *testing.T) {
	t.Setenv("RUBRIC_TEST_INHERITED", "yes")
	p, err := Compile("command:" + script(t, `[ -z "$RUBRIC_TEST_INHERITED" ] && [ "$GIVEN" = 1 ] && [ -n "$EVALFLOW_TASK_FILE" ] && echo 1 || echo 0`+"\n"))
	require.NoError(t, err)
	s, err := p.Score(context.Background(), Input{Task: verified, Env: []string{"PATH=" + os.Getenv("PATH"), "GIVEN=1"}})
	require.NoError(t, err)
	assert.Equal(t, 1.0, s.Reward, "Env is the command's whole environment, with the contract's variables")

	s, err = p.Score(context.Background(), Input{Task: verified})
	require.NoError(t, err)
	assert.Equal(t, 0.0, s.Reward, "without Env, the process's own")
}

func TestCommandFailures(t *testing.T) {
	tests := []struct {
		name   string
		spec   string // %s is the script
		body   string
		reason string
		stderr string
	}{
		{"non-zero exit", "command:%s", "echo 'cannot import grader' >&2\nexit 3\n", "exit status 3", "cannot import grader"},
		{"garbage", "command:%s", "echo looks good to me\n", `printed "looks good to me", not a number or a JSON object of named numbers`, ""},
		{"nothing", "command:%s", "true\n", `printed "", not a number`, ""},
		{"NaN", "command:%s", "echo NaN\n", `printed "NaN"`, ""},
		{"a JSON array", "command:%s", "echo '[1, 2]'\n", `printed "[1, 2]"`, ""},
		{"a JSON object of text", "command:%s", `echo '{"verdict": "pass"}'` + "\n", `printed "{\"verdict\": \"pass\"}"`, ""},
		{"two JSON objects", "command:%s", `echo '{"a": 1} {"b": 2}'` + "\n", "not a number or a JSON object", ""},
		{"timeout", "command?timeout=200ms:%s", "echo started >&2\nsleep 30 &\nwait\n", "timed out after 200ms", "started"},
		{"not found", "command:%s", "", "exit status 127", "not found"},
	}
	for _, tt := range tests {
		path := script(t, tt.body)
		if tt.name == "not found" {
			path = filepath.Join(t.TempDir(), "missing.sh")
		}
		p, err := Compile(fmt.Sprintf(tt.spec, path))
		require.NoError(t, err, tt.name)
		start := time.Now()
		s, err := p.Score(context.Background(), Input{Task: verified, Answer: "42"})
		require.Error(t, err, "%s: Score = %v, want an error", tt.name, s)
		assert.Less(t, time.Since(start), 20*time.Second, "%s: the command ran to its end", tt.name)
		var se *ScoringError
		require.True(t, errors.As(err, &se), "%s: %v is a %T, want a *ScoringError", tt.name, err, err)
		assert.Equal(t, "command", se.Part, tt.name)
		assert.Contains(t, se.Reason, tt.reason, tt.name)
		assert.Contains(t, se.Stderr, tt.stderr, tt.name)
		assert.Contains(t, err.Error(), "rubric command: ", tt.name)
	}
}

func TestCommandStopsWithItsContext(t *testing.T) {
	p, err := Compile("command:" + script(t, "sleep 30\n"))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = p.Score(ctx, Input{Task: verified})
	var se *ScoringError
	require.True(t, errors.As(err, &se), "%v is a %T, want a *ScoringError", err, err)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestCommandOutputLimit(t *testing.T) {
	var b limitedBuffer
	b.limit = 4
	n, err := b.Write([]byte("abc"))
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	n, err = b.Write([]byte("defg"))
	require.NoError(t, err)
	assert.Equal(t, 4, n, "a full buffer takes every write, so the program never blocks")
	assert.Equal(t, "abcd", b.String())
}
