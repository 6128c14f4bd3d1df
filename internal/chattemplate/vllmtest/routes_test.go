package vllmtest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/chattemplate"
	"github.com/evalflow/evalflow/internal/chattemplate/vllmtest"
)

// prime-rl's tokens route takes the prompt as ids: the completion
// continues them, whatever the messages would render to, and answers the
// turn the messages are at.
func TestTokensRouteContinuesTheGivenIDs(t *testing.T) {
	srv := vllmtest.Start(t, vllmtest.Config{Family: chattemplate.Qwen3, Script: []vllmtest.Entry{{Match: "17 * 23", Turns: []vllmtest.Turn{
		{Content: "391."}, {Content: "55."}}}}})
	msgs := []any{user("What is 17 * 23?")}
	first := chat(t, srv, "/v1/chat/completions", map[string]any{"messages": msgs, "return_token_ids": true})
	msgs = append(msgs, map[string]any{"role": "assistant", "content": "391."}, user("And divided by 7?"))
	prompt := append(append([]int32{}, first.PromptTokenIDs...), first.Choices[0].TokenIDs...)
	tail, err := srv.Tokenize(vllmtest.TokenizeRequest{Prompt: ptr("\n<|im_start|>user\nAnd divided by 7?<|im_end|>\n<|im_start|>assistant\n")})
	require.NoError(t, err)
	prompt = append(prompt, tail...)

	a := chat(t, srv, "/v1/chat/completions/tokens", map[string]any{"messages": msgs, "tokens": prompt, "return_token_ids": true})
	assert.Equal(t, prompt, a.PromptTokenIDs, "the prompt is the ids given")
	assert.Equal(t, "55.", str(a.Choices[0].Message.Content), "the second turn")
	assert.Equal(t, len(prompt), a.Usage.PromptTokens)
	rendered, err := srv.Tokenize(vllmtest.TokenizeRequest{Messages: msgs, AddGenerationPrompt: true})
	require.NoError(t, err)
	assert.NotEqual(t, rendered, prompt, "Qwen3 re-renders the earlier turn without its <think> block")

	for _, bad := range []any{nil, []int32{}, []int64{1 << 40}, "ids"} {
		status, data := post(t, srv.BaseURL+"/chat/completions/tokens", map[string]any{"messages": msgs, "tokens": bad})
		assert.Equal(t, http.StatusBadRequest, status, "tokens %v: %s", bad, data)
	}
}

func ptr[T any](v T) *T { return &v }

// The script answers the turn numbered by the assistant messages after
// the matching user message, the last repeating; a scripted status is the
// answer's, in vLLM's error shape, as an unmatched conversation's 400 and
// another model's 404 are.
func TestScriptTurnsAndErrors(t *testing.T) {
	srv := vllmtest.Start(t, vllmtest.Config{Family: chattemplate.DeepSeekV3, Model: "org/DeepSeek-V3-test", Script: []vllmtest.Entry{
		{Match: "count", Turns: []vllmtest.Turn{{Content: "one"}, {Content: "two"}}},
		{Match: "busy", Turns: []vllmtest.Turn{{Status: 429, Error: "slow down"}}},
	}})
	assert.Equal(t, "org/DeepSeek-V3-test", srv.Model)
	msgs := []any{user("Please count.")}
	for _, want := range []string{"one", "two", "two"} {
		a := chat(t, srv, "/v1/chat/completions", map[string]any{"model": srv.Model, "messages": msgs})
		assert.Equal(t, want, str(a.Choices[0].Message.Content))
		msgs = append(msgs, map[string]any{"role": "assistant", "content": want}, user("Go on."))
	}
	for _, c := range []struct {
		body    map[string]any
		status  int
		message string
	}{
		{map[string]any{"messages": []any{user("Are you busy?")}}, http.StatusTooManyRequests, "slow down"},
		{map[string]any{"messages": []any{user("Hello.")}}, http.StatusBadRequest, "no script entry matches"},
		{map[string]any{"model": "other", "messages": []any{user("Please count.")}}, http.StatusNotFound, "The model `other` does not exist."},
		{map[string]any{"messages": []any{user("Please count.")}, "n": 2}, http.StatusBadRequest, "n must be 1"},
	} {
		status, data := post(t, srv.BaseURL+"/chat/completions", c.body)
		assert.Equal(t, c.status, status, "%s", data)
		var e struct {
			Error struct {
				Message string `json:"message"`
				Code    int    `json:"code"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(data, &e), "%s", data)
		assert.Contains(t, e.Error.Message, c.message)
		assert.Equal(t, c.status, e.Error.Code)
	}
	status, _ := post(t, srv.URL+"/v1/completions", map[string]any{"prompt": "x"})
	assert.Equal(t, http.StatusNotFound, status, "a route vLLM has but this server does not serve")
}

// /v1/models names the served model and its context length, which
// /tokenize reports too.
func TestModelsAndContextLength(t *testing.T) {
	srv := vllmtest.Start(t, vllmtest.Config{Family: chattemplate.Llama31, MaxModelLen: 64})
	assert.Equal(t, "meta-llama/Llama-3.1-8B-Instruct", srv.Model)
	resp, err := http.Get(srv.BaseURL + "/models")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var models struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&models))
	require.Len(t, models.Data, 1)
	assert.Equal(t, 64, models.Data[0].MaxModelLen)

	status, data := post(t, srv.URL+"/tokenize", map[string]any{"prompt": "hello"})
	require.Equal(t, http.StatusOK, status)
	var tok struct {
		Count       int `json:"count"`
		MaxModelLen int `json:"max_model_len"`
	}
	require.NoError(t, json.Unmarshal(data, &tok))
	assert.Equal(t, 64, tok.MaxModelLen)
	assert.Equal(t, 2, tok.Count, "<|begin_of_text|> and hello")

	long := make([]any, 0, 40)
	for range 40 {
		long = append(long, user("a long conversation"))
	}
	status, data = post(t, srv.BaseURL+"/chat/completions", map[string]any{"messages": long})
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, string(data), "maximum context length is 64 tokens")
}

// failures is a testing.TB that keeps what a helper fails with and logs;
// its FailNow ends the goroutine, as testing's does.
type failures struct {
	testing.TB
	mu       sync.Mutex
	messages []string
}

func (f *failures) Errorf(format string, args ...any) { f.Logf(format, args...) }

func (f *failures) Logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.messages = append(f.messages, fmt.Sprintf(format, args...))
}

func (f *failures) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.messages, "\n")
}

func (f *failures) Failed() bool { return f.String() != "" }

func (f *failures) FailNow() { runtime.Goexit() }

// start starts cfg's upstream, which must fail: what it failed with.
func (f *failures) start(cfg vllmtest.Config) string {
	done := make(chan struct{})
	go func() {
		defer close(done)
		vllmtest.Start(f, cfg)
	}()
	<-done
	require.True(f.TB, f.Failed(), "Start fails the test")
	return f.String()
}

// Without Node.js, or without the npm packages make setup installs, a
// test fails and says what to do; it never skips, and nothing is
// downloaded. A server that cannot start fails the test with its log.
func TestStartFails(t *testing.T) {
	t.Run("node", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		f := &failures{TB: t}
		assert.Contains(t, f.start(vllmtest.Config{Family: chattemplate.Qwen3}), "runs on Node.js: install nodejs (make setup does)")
	})
	t.Run("packages", func(t *testing.T) {
		cache := t.TempDir()
		t.Setenv("XDG_CACHE_HOME", cache)
		dir, err := vllmtest.InstallDir()
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(dir, filepath.Join(cache, "evalflow", "vllmtest-")), dir)
		f := &failures{TB: t}
		assert.Contains(t, f.start(vllmtest.Config{Family: chattemplate.Qwen3}), "npm packages are not installed in "+dir+": run make setup")
	})
	t.Run("script", func(t *testing.T) {
		f := &failures{TB: t}
		t.Cleanup(func() {
			assert.Contains(t, f.String(), "script.jsonl:1: turn 1: Llama 3.1 does not reason", "the server's log")
		})
		bad := []vllmtest.Entry{{Turns: []vllmtest.Turn{{Reasoning: "hmm"}}}}
		assert.Contains(t, f.start(vllmtest.Config{Family: chattemplate.Llama31, Script: bad}), "the test upstream exited before it served")
	})
}
