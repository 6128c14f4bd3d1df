package interception_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/internal/logtest"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/trace"
)

// closedURL is the base URL of a port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return "http://" + addr + "/v1"
}

// keyed serves the mock model to callers presenting key, and counts them.
func keyed(t *testing.T, key string, calls *atomic.Int32) string {
	t.Helper()
	m, err := mock.New(mock.Config{})
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("Authorization") != "Bearer "+key {
			writeJSON(w, http.StatusUnauthorized, `{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}`)
			return
		}
		m.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// client is a providers client that retries fast.
func client(url, key string) *providers.Client {
	c := providers.NewOpenAI(url, key)
	c.BaseDelay, c.MaxDelay = time.Microsecond, time.Microsecond
	return c
}

// routed is a pool whose rollout has a policy and a user route.
type routed struct {
	pool *interception.Pool
	slot *interception.Registration
	log  *logtest.Buffer
	turn chan trace.Turn
}

func newRouted(t *testing.T, r interception.Rollout) routed {
	t.Helper()
	log := &logtest.Buffer{}
	turns := make(chan trace.Turn, 16)
	pool := interception.NewPool(interception.Config{
		Upstream: client(closedURL(t), ""),
		Logger:   slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnTurn:   func(_ string, turn trace.Turn) { turns <- turn },
	})
	t.Cleanup(func() { assert.NoError(t, pool.Close()) })
	r.Key, r.Model = "run/0/0/0", "mock"
	slot, err := pool.Acquire(context.Background(), r)
	require.NoError(t, err)
	return routed{pool: pool, slot: slot, log: log, turn: turns}
}

func (f routed) ask(t *testing.T) (*openai.ChatCompletion, error) {
	t.Helper()
	c := openai.NewClient(option.WithBaseURL(f.slot.LocalURL+"/v1/"), option.WithAPIKey(f.slot.Secret), option.WithMaxRetries(0))
	return c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 2+3?")},
	})
}

// The policy's first provider is down (a closed port): the call goes to
// its fallback, the harness gets the fallback's answer, and the turn names
// both. No provider's key reaches the turn or the log.
func TestPolicyFallsBackWhenItsProviderIsDown(t *testing.T) {
	const key = "sk-backup-secret-4f1c9a"
	var calls atomic.Int32
	f := newRouted(t, interception.Rollout{Policy: []interception.Target{
		{Name: "primary", Upstream: client(closedURL(t), "sk-primary-secret-77ab")},
		{Name: "backup", Upstream: client(keyed(t, key, &calls), key)},
	}})
	got, err := f.ask(t)
	require.NoError(t, err)
	require.NotEmpty(t, got.Choices)
	assert.NotEmpty(t, got.Choices[0].Message.Content)
	assert.Equal(t, int32(1), calls.Load(), "the backup answered once, with its key")

	turn := <-f.turn
	assert.Equal(t, http.StatusOK, turn.Status)
	assert.Equal(t, "backup", turn.Provider)
	assert.Equal(t, []string{"primary"}, turn.FallbackFrom)
	assert.Empty(t, turn.UpstreamFailure, "the call was answered")
	assert.Equal(t, providers.DefaultMaxAttempts+1, turn.Attempts, "the primary's attempts, then the backup's one")

	turns, ok := f.slot.Turns()
	require.True(t, ok)
	b, err := json.Marshal(turns)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"provider":"backup","fallback_from":["primary"]`)
	for _, secret := range []string{key, "sk-primary-secret-77ab"} {
		assert.NotContains(t, string(b), secret, "a key in the trace")
		assert.NotContains(t, f.log.String(), secret, "a key in the log")
	}
}

// A provider failing with 503 after its retries is the infrastructure's
// failure: the next provider answers.
func TestPolicyFallsBackOnA5xx(t *testing.T) {
	var failed atomic.Int32
	busy := upstream(t, func(w http.ResponseWriter, _ *http.Request) {
		failed.Add(1)
		writeJSON(w, http.StatusServiceUnavailable, `{"error":{"message":"overloaded","type":"server_error","code":null}}`)
	})
	f := newRouted(t, interception.Rollout{Policy: []interception.Target{
		{Name: "busy", Upstream: client(busy.URL+"/v1", "")},
		{Name: "mock", Upstream: client(mockUpstream(t), "")},
	}})
	_, err := f.ask(t)
	require.NoError(t, err)
	assert.Equal(t, int32(providers.DefaultMaxAttempts), failed.Load(), "the busy provider had its retries first")
	turn := <-f.turn
	assert.Equal(t, "mock", turn.Provider)
	assert.Equal(t, []string{"busy"}, turn.FallbackFrom)
}

// A 400 is the request's fault: another provider would refuse it alike,
// so the caller gets it and no fallback is tried.
func TestPolicyDoesNotFallBackOnA400(t *testing.T) {
	first := upstream(t, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusBadRequest, `{"error":{"message":"context too long","type":"invalid_request_error","code":"context_length_exceeded"}}`)
	})
	var second atomic.Int32
	f := newRouted(t, interception.Rollout{Policy: []interception.Target{
		{Name: "first", Upstream: client(first.URL+"/v1", "")},
		{Name: "second", Upstream: client(keyed(t, "k", &second), "k")},
	}})
	_, err := f.ask(t)
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	assert.Equal(t, int32(0), second.Load(), "the fallback was called for a 400")
	turn := <-f.turn
	assert.Equal(t, "first", turn.Provider)
	assert.Empty(t, turn.FallbackFrom)
	assert.Empty(t, turn.UpstreamFailure, "a 400 is no infrastructure failure")
}

// When every provider of the route is down, the call fails as the
// infrastructure's, naming the last provider and the ones before it.
func TestPolicyAllProvidersDownIsAnUpstreamFailure(t *testing.T) {
	f := newRouted(t, interception.Rollout{Policy: []interception.Target{
		{Name: "a", Upstream: client(closedURL(t), "")},
		{Name: "b", Upstream: client(closedURL(t), "")},
	}})
	_, err := f.ask(t)
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadGateway, apiErr.StatusCode)
	turn := <-f.turn
	assert.Equal(t, trace.UpstreamConnection, turn.UpstreamFailure)
	assert.Equal(t, "b", turn.Provider)
	assert.Equal(t, []string{"a"}, turn.FallbackFrom)
}

// A policy provider of another dialect than the server's upstream cannot
// take calls made for that dialect: the rollout is refused as a
// configuration error.
func TestPolicyProviderOfAnotherDialectIsRefused(t *testing.T) {
	pool := interception.NewPool(interception.Config{Upstream: client(mockUpstream(t), "")})
	t.Cleanup(func() { assert.NoError(t, pool.Close()) })
	_, err := pool.Acquire(context.Background(), interception.Rollout{Key: "run/0/0/0", Model: "mock", Policy: []interception.Target{
		{Name: "claude", Upstream: providers.NewAnthropic(mockUpstream(t), "")},
	}})
	var re *interception.RouteError
	require.ErrorAs(t, err, &re)
	assert.Contains(t, err.Error(), "the policy's provider claude speaks anthropic")
}

// The simulated user asks its own provider, with its own model, and falls
// back like the policy; its turn names the provider.
func TestUserRoleAsksItsProvider(t *testing.T) {
	var models []string
	var mu sync.Mutex
	m, err := mock.New(mock.Config{})
	require.NoError(t, err)
	persona := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Model string `json:"model"`
		}
		data, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(data, &body)
		mu.Lock()
		models = append(models, body.Model)
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(data))
		m.ServeHTTP(w, r)
	})
	f := newRouted(t, interception.Rollout{User: []interception.Target{
		{Name: "down", Upstream: client(closedURL(t), "")},
		{Name: "persona-host", Upstream: client(persona.URL+"/v1", ""), Model: "persona-model"},
	}})
	require.True(t, f.slot.SetTask(json.RawMessage(`{"id":"t","prompt":"What is 2+2?","user":{"persona":"You are a student. {{prompt}}"}}`)))
	status, body := sideCall(t, http.MethodPost, f.slot.LocalURL+"/user", f.slot.Secret, `{"messages":[{"role":"user","content":"What is 2+2?"},{"role":"assistant","content":"4"}]}`)
	require.Equal(t, http.StatusOK, status, body)
	side, _ := f.slot.Side()
	require.Len(t, side.Users, 1)
	call := side.Users[0].Call
	require.NotNil(t, call)
	assert.Equal(t, "persona-host", call.Provider)
	assert.Equal(t, []string{"down"}, call.FallbackFrom)
	assert.Equal(t, "persona-model", call.Request.Model)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"persona-model"}, models, "the persona's provider was asked for its model")
}
