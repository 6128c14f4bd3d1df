package activities_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
)

// sdkHarness is a harness making one model call on openai-go with its
// default retries, as an agent does: an error it gets makes it exit 1.
func sdkHarness(stream bool) fakeRuntime {
	return func(ctx context.Context, spec harness.Spec) (harness.Result, error) {
		c := openai.NewClient(option.WithBaseURL(spec.BaseURL+"/v1/"), option.WithAPIKey(spec.Secret))
		params := openai.ChatCompletionNewParams{
			Model:    spec.Model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(spec.Task.Prompt)},
		}
		var err error
		if stream {
			s := c.Chat.Completions.NewStreaming(ctx, params)
			for s.Next() {
			}
			err = s.Err()
			_ = s.Close()
		} else {
			_, err = c.Chat.Completions.New(ctx, params)
		}
		if err != nil {
			return harness.Result{ExitCode: 1, Stderr: "Traceback: " + err.Error()}, nil
		}
		return harness.Result{}, nil
	}
}

const firstChunk = `{"id":"s-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"The answer"},"finish_reason":null}]}`

func event(w http.ResponseWriter, data string) {
	_, _ = io.WriteString(w, "data: "+data+"\n\n")
	w.(http.Flusher).Flush()
}

// hang waits until the caller hangs up, its body read first so that the
// server notices.
func hang(r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

// TestProviderFaultsAreInfrastructure is the provider half of the fault
// suite as a rollout sees it: whatever way the provider fails, a harness
// that gives up on it makes the attempt a retried UpstreamUnavailable,
// never a scored failure of the agent, and the attempt costs the provider
// at most MaxAttempts + the SDK's 2 retries calls.
func TestProviderFaultsAreInfrastructure(t *testing.T) {
	const bound = providers.DefaultMaxAttempts + 2
	tests := []struct {
		name    string
		stream  bool
		serve   http.HandlerFunc
		failure trace.UpstreamFailure
	}{
		{"cut-mid-body", false, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "400")
			_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","choi`)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}, trace.UpstreamConnection},
		{"cut-mid-stream", true, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			event(w, firstChunk)
			panic(http.ErrAbortHandler)
		}, trace.UpstreamConnection},
		{"hang-before-headers", false, func(_ http.ResponseWriter, r *http.Request) { hang(r) }, trace.UpstreamTimeout},
		{"hang-mid-stream", true, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			event(w, firstChunk)
			hang(r)
		}, trace.UpstreamTimeout},
		{"429-retry-after", false, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After-Ms", "10")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests"}}`)
		}, trace.UpstreamStatus},
		{"500", false, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":{"message":"The server had an error","type":"server_error"}}`)
		}, trace.UpstreamStatus},
		{"invalid-json-200", false, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `<html>upstream connect error</html>`)
		}, trace.UpstreamBadAnswer},
		{"truncated-sse", true, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			event(w, firstChunk)
		}, trace.UpstreamTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				tt.serve(w, r)
			}))
			t.Cleanup(srv.Close)
			up := providers.NewOpenAI(srv.URL+"/v1", "sk-upstream-key")
			up.BaseDelay, up.MaxDelay = time.Microsecond, time.Microsecond
			up.ResponseHeaderTimeout, up.StreamIdleTimeout = 250*time.Millisecond, 250*time.Millisecond
			r := newRigWith(t, up, sdkHarness(tt.stream))

			_, err := r.rollout(t, ref(1))
			require.Error(t, err)
			var appErr *temporal.ApplicationError
			require.ErrorAs(t, err, &appErr)
			assert.Equal(t, rollout.ErrTypeUpstream, appErr.Type(), "%v", err)
			assert.False(t, appErr.NonRetryable(), "the workflow retries it")
			assert.Contains(t, err.Error(), string(tt.failure))

			ctx := context.Background()
			_, scored, err := r.store.Get(ctx, "run", ref(1).Key())
			require.NoError(t, err)
			assert.False(t, scored, "not scored as the agent's failure")
			all, err := r.store.Attempts(ctx, "run", ref(1).Key())
			require.NoError(t, err)
			require.Len(t, all, 1, "the attempt's trace is kept")
			require.NotEmpty(t, all[0].Turns)
			for _, turn := range all[0].Turns {
				assert.Equal(t, tt.failure, turn.UpstreamFailure, turn.Error)
				assert.NotContains(t, turn.Error, "sk-upstream-key")
			}
			assert.Contains(t, all[0].Harness.Stderr, "Traceback")
			assert.LessOrEqual(t, int(calls.Load()), bound, "upstream calls within the documented bound")
			t.Logf("%s: 1 caller request, %d SDK tries, %d upstream calls (bound %d), classified %s (%s)",
				tt.name, len(all[0].Turns), calls.Load(), bound, appErr.Type(), tt.failure)
		})
	}
}

// A harness timed out while the provider failed its last call is the
// provider's failure, not the agent's timeout.
func TestRunTimeoutAfterAHungProviderIsRetried(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { hang(r) }))
	t.Cleanup(srv.Close)
	up := providers.NewOpenAI(srv.URL+"/v1", "")
	up.ResponseHeaderTimeout, up.MaxAttempts = 100*time.Millisecond, 1
	r := newRigWith(t, up, func(ctx context.Context, spec harness.Spec) (harness.Result, error) {
		status, err := callModel(ctx, spec)
		if err != nil {
			return harness.Result{}, err
		}
		// The agent waited on, then ran out of time.
		return harness.Result{ExitCode: -1, TimedOut: true, Stderr: fmt.Sprint("last call: ", status)}, nil
	})
	_, err := r.rollout(t, ref(1))
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, rollout.ErrTypeUpstream, appErr.Type())
	assert.Contains(t, err.Error(), "timeout failure, last status 504")
}

// A provider that hangs longer than the harness may run (its header timeout
// is the default 5 minutes): the harness is stopped at its timeout with its
// call still waiting, and the attempt is the provider's failure, retried,
// never the agent's timeout.
func TestHarnessTimeoutWhileTheProviderHangs(t *testing.T) {
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		hang(r)
	}))
	t.Cleanup(srv.Close)
	up := providers.NewOpenAI(srv.URL+"/v1", "")
	// Its header timeout is the default, minutes: it outlasts the harness.
	r := newRigWith(t, up, func(ctx context.Context, spec harness.Spec) (harness.Result, error) {
		callCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = callModel(callCtx, spec)
		}()
		<-arrived
		// The harness timeout: the process is killed, its connection cut,
		// while the call waits on the provider.
		stop()
		<-done
		return harness.Result{ExitCode: -1, TimedOut: true}, nil
	})
	_, err := r.rollout(t, ref(1))
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, rollout.ErrTypeUpstream, appErr.Type(), "%v", err)
	assert.False(t, appErr.NonRetryable(), "the workflow retries it")
	assert.Contains(t, err.Error(), "timeout failure")

	_, scored, err := r.store.Get(context.Background(), "run", ref(1).Key())
	require.NoError(t, err)
	assert.False(t, scored, "not scored as the agent's timeout")
}
