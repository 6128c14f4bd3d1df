package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/internal/harness/agent"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/tasksets"
	"github.com/evalflow/evalflow/trace"
)

const secret = "sk-rollout-secret-123"

// recorder wraps the mock model and keeps every request body and its
// Authorization header.
type recorder struct {
	next http.Handler
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	auth, apiKey, path string
	body               map[string]any
	raw                []byte
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var body map[string]any
	_ = json.Unmarshal(data, &body) // the mock reports bad bodies itself
	rec.mu.Lock()
	rec.reqs = append(rec.reqs, recorded{auth: r.Header.Get("Authorization"), apiKey: r.Header.Get("X-Api-Key"), path: r.URL.Path, body: body, raw: data})
	rec.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(data))
	rec.next.ServeHTTP(w, r)
}

func (rec *recorder) requests() []recorded {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]recorded(nil), rec.reqs...)
}

// setup starts a mock model and sets the harness environment for task.
// It returns the recorder and the answer file path.
func setup(t *testing.T, cfg mock.Config, task tasksets.Task) (*recorder, string) {
	t.Helper()
	m, err := mock.New(cfg)
	require.NoError(t, err)
	rec := &recorder{next: m}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	taskFile := filepath.Join(dir, "task.json")
	data, err := json.Marshal(task)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(taskFile, data, 0o644))
	answerFile := filepath.Join(dir, "answer.txt")

	t.Setenv("OPENAI_BASE_URL", srv.URL+"/v1")
	t.Setenv("OPENAI_API_KEY", secret)
	t.Setenv("OPENAI_MODEL", "mock")
	t.Setenv("ANTHROPIC_BASE_URL", srv.URL)
	t.Setenv("ANTHROPIC_API_KEY", secret)
	t.Setenv("ANTHROPIC_MODEL", "mock")
	t.Setenv("EVALFLOW_TASK_FILE", taskFile)
	t.Setenv("EVALFLOW_ANSWER_FILE", answerFile)
	t.Setenv("EVALFLOW_MAX_TURNS", "")
	return rec, answerFile
}

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = agent.Main(context.Background(), append([]string{"--max-retries=0"}, args...), &out, &errOut)
	assert.NotContains(t, out.String(), secret, "stdout leaks the API key")
	assert.NotContains(t, errOut.String(), secret, "stderr leaks the API key")
	return code, out.String(), errOut.String()
}

func TestSolvesWithCalculator(t *testing.T) {
	for _, args := range [][]string{nil, {"--no-stream"}} {
		t.Run(strings.Join(append([]string{"stream"}, args...), " "), func(t *testing.T) {
			rec, answerFile := setup(t, mock.Config{}, tasksets.Task{ID: "t1", Prompt: "What is 37 * (12 + 5)?"})

			code, stdout, stderr := run(t, args...)
			require.Equal(t, agent.ExitOK, code, "stderr: %s", stderr)
			answer, err := os.ReadFile(answerFile)
			require.NoError(t, err)
			assert.Equal(t, "The answer is 629.", string(answer))
			assert.Equal(t, "turn 1: calculator -> 629\nturn 2: answer (18 chars)\n", stdout)

			reqs := rec.requests()
			require.Len(t, reqs, 2)
			assert.Equal(t, "Bearer "+secret, reqs[0].auth)
			assert.Equal(t, len(args) == 0, reqs[0].body["stream"] == true, "stream flag sent")
			msgs, _ := reqs[1].body["messages"].([]any)
			require.Len(t, msgs, 4, "system, user, assistant tool call, tool result")
			roles := []string{}
			for _, m := range msgs {
				roles = append(roles, m.(map[string]any)["role"].(string))
			}
			assert.Equal(t, []string{"system", "user", "assistant", "tool"}, roles)
			assistant := msgs[2].(map[string]any)
			assert.NotEmpty(t, assistant["tool_calls"], "assistant tool call replayed to the model")
			assert.Equal(t, "629", msgs[3].(map[string]any)["content"])
		})
	}
}

func TestTaskMessages(t *testing.T) {
	rec, answerFile := setup(t, mock.Config{}, tasksets.Task{ID: "t2", Messages: []tasksets.Message{
		{Role: "system", Content: "Be terse."},
		{Role: "user", Content: "What is 6 * 7?"},
	}})
	code, _, stderr := run(t, "--no-stream")
	require.Equal(t, agent.ExitOK, code, "stderr: %s", stderr)
	answer, err := os.ReadFile(answerFile)
	require.NoError(t, err)
	assert.Equal(t, "The answer is 42.", string(answer))
	first := rec.requests()[0].body["messages"].([]any)
	assert.Equal(t, "Be terse.", first[0].(map[string]any)["content"], "the task's own system prompt replaces the default")
	assert.Len(t, first, 2)
}

// Against a server that enforces no turn limit, the agent stops itself at
// its safety bound, well past EVALFLOW_MAX_TURNS.
func TestSafetyBound(t *testing.T) {
	script := filepath.Join(t.TempDir(), "script.jsonl")
	require.NoError(t, os.WriteFile(script,
		[]byte(`{"match":"","turns":[{"tool_calls":[{"name":"calculator","arguments":{"expression":"1 + 1"}}]}]}`), 0o644))
	rec, answerFile := setup(t, mock.Config{Script: script}, tasksets.Task{ID: "t3", Prompt: "loop forever"})
	t.Setenv("EVALFLOW_MAX_TURNS", "3")

	code, stdout, stderr := run(t)
	assert.Equal(t, agent.ExitTurnLimit, code, "stderr: %s", stderr)
	assert.Len(t, rec.requests(), agent.SafetyTurns(3))
	assert.Greater(t, agent.SafetyTurns(3), 3, "the agent does not stop itself at the rollout's limit")
	assert.Equal(t, agent.SafetyTurns(3), strings.Count(stdout, "\n"), "one line per turn: %q", stdout)
	assert.Contains(t, stderr, "turn limit")
	assert.NoFileExists(t, answerFile)
}

// Behind an interception server enforcing the rollout's turn limit, the
// agent makes the call past it, is refused, and exits ExitLimit; the
// refused turn records the limit.
func TestInterceptionEnforcesTheTurnLimit(t *testing.T) {
	for _, dialect := range []string{agent.DialectChat, agent.DialectResponses, agent.DialectAnthropic} {
		t.Run(dialect, func(t *testing.T) {
			script := filepath.Join(t.TempDir(), "script.jsonl")
			require.NoError(t, os.WriteFile(script,
				[]byte(`{"match":"","turns":[{"tool_calls":[{"name":"calculator","arguments":{"expression":"1 + 1"}}]}]}`), 0o644))
			rec, answerFile := setup(t, mock.Config{Script: script}, tasksets.Task{ID: "t3", Prompt: "loop forever"})
			up := httptest.NewServer(rec)
			t.Cleanup(up.Close)
			client, err := providers.New(dialect, up.URL+"/v1", "upstream-key")
			require.NoError(t, err)
			pool := interception.NewPool(interception.Config{Upstream: client})
			t.Cleanup(func() { assert.NoError(t, pool.Close()) })
			const key = "run/0/0/0"
			slot, err := pool.Acquire(context.Background(), interception.Rollout{Key: key, Model: "mock",
				Limits: interception.Limits{Turns: 3}})
			require.NoError(t, err)
			t.Setenv("OPENAI_BASE_URL", slot.LocalURL+"/v1")
			t.Setenv("ANTHROPIC_BASE_URL", slot.LocalURL)
			t.Setenv("OPENAI_API_KEY", slot.Secret)
			t.Setenv("ANTHROPIC_API_KEY", slot.Secret)
			t.Setenv("EVALFLOW_MAX_TURNS", "3")

			code, _, stderr := run(t, "--dialect="+dialect)
			assert.Equal(t, agent.ExitLimit, code, "stderr: %s", stderr)
			assert.Contains(t, stderr, "rollout limit reached")
			assert.NotContains(t, stderr, slot.Secret)
			assert.Len(t, rec.requests(), 3, "the provider is called up to the limit, not past it")
			assert.NoFileExists(t, answerFile)
			turns, ok := slot.Finish()
			require.True(t, ok)
			require.Len(t, turns, 4)
			assert.Equal(t, trace.LimitTurns, turns[3].Limit)
			assert.Empty(t, turns[2].Limit)
		})
	}
}

func TestAPIErrors(t *testing.T) {
	t.Run("bad base URL", func(t *testing.T) {
		_, answerFile := setup(t, mock.Config{}, tasksets.Task{ID: "t4", Prompt: "What is 1 + 1?"})
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close()) // nothing listens here any more
		t.Setenv("OPENAI_BASE_URL", "http://"+addr+"/v1")

		code, _, stderr := run(t)
		assert.Equal(t, agent.ExitError, code)
		assert.Contains(t, stderr, "turn 1:")
		assert.NoFileExists(t, answerFile)
	})
	t.Run("upstream error quoting the key", func(t *testing.T) {
		script := filepath.Join(t.TempDir(), "script.jsonl")
		require.NoError(t, os.WriteFile(script,
			[]byte(`{"match":"","turns":[{"status":401,"error":"bad key `+secret+`"}]}`), 0o644))
		setup(t, mock.Config{Script: script}, tasksets.Task{ID: "t5", Prompt: "hi"})

		code, _, stderr := run(t, "--no-stream")
		assert.Equal(t, agent.ExitError, code)
		assert.Contains(t, stderr, "401")
		assert.Contains(t, stderr, "[redacted]")
	})
}

func TestBadEnvironment(t *testing.T) {
	tests := []struct {
		name  string
		key   string
		value string
		want  string
	}{
		{"no model", "OPENAI_MODEL", "", "OPENAI_MODEL is not set"},
		{"no task file", "EVALFLOW_TASK_FILE", "", "EVALFLOW_TASK_FILE is not set"},
		{"missing task file", "EVALFLOW_TASK_FILE", "/nonexistent/task.json", "read task"},
		{"bad max turns", "EVALFLOW_MAX_TURNS", "many", `EVALFLOW_MAX_TURNS="many"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, _ := setup(t, mock.Config{}, tasksets.Task{ID: "t6", Prompt: "What is 1 + 1?"})
			t.Setenv(tt.key, tt.value)
			code, _, stderr := run(t)
			assert.Equal(t, agent.ExitError, code)
			assert.Contains(t, stderr, tt.want)
			assert.Empty(t, rec.requests(), "no model call on a bad environment")
		})
	}
}

func TestDialects(t *testing.T) {
	tests := []struct {
		dialect, path string
		auth          func(recorded) string
	}{
		{"chat", "/v1/chat/completions", func(r recorded) string { return r.auth }},
		{"responses", "/v1/responses", func(r recorded) string { return r.auth }},
		{"anthropic", "/v1/messages", func(r recorded) string { return "Bearer " + r.apiKey }},
	}
	for _, tt := range tests {
		for _, args := range [][]string{nil, {"--no-stream"}} {
			t.Run(strings.Join(append([]string{tt.dialect}, args...), " "), func(t *testing.T) {
				rec, answerFile := setup(t, mock.Config{}, tasksets.Task{ID: "t1", Prompt: "What is 37 * (12 + 5)?"})
				code, stdout, stderr := run(t, append([]string{"--dialect", tt.dialect}, args...)...)
				require.Equal(t, agent.ExitOK, code, "stderr: %s", stderr)
				answer, err := os.ReadFile(answerFile)
				require.NoError(t, err)
				assert.Equal(t, "The answer is 629.", string(answer))
				assert.Equal(t, "turn 1: calculator -> 629\nturn 2: answer (18 chars)\n", stdout)
				reqs := rec.requests()
				require.Len(t, reqs, 2)
				for _, r := range reqs {
					assert.Equal(t, tt.path, r.path)
					assert.Equal(t, "Bearer "+secret, tt.auth(r))
					assert.Equal(t, len(args) == 0, r.body["stream"] == true, "stream flag sent")
				}
			})
		}
	}
}

func TestUnknownDialect(t *testing.T) {
	setup(t, mock.Config{}, tasksets.Task{ID: "t1", Prompt: "hi"})
	code, _, stderr := run(t, "--dialect", "gemini")
	assert.Equal(t, agent.ExitError, code)
	assert.Contains(t, stderr, `--dialect "gemini"`)
}
