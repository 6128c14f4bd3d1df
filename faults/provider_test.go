package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

// faultyProvider is the offline mock model behind a switch that fails its
// next calls one way or another: the provider a rollout must survive.
type faultyProvider struct {
	model http.Handler

	mu   sync.Mutex
	mode string
	left int // calls still to fail; -1: every call
	// calls counts every call that reached the provider.
	calls atomic.Int64
	// hung are released when the test ends, so a hang ends with it.
	hung chan struct{}
}

func newFaultyProvider(t *testing.T) (*faultyProvider, string) {
	t.Helper()
	m, err := mock.New(mock.Config{})
	require.NoError(t, err)
	p := &faultyProvider{model: m, hung: make(chan struct{})}
	srv := httptest.NewServer(p)
	t.Cleanup(func() {
		close(p.hung)
		srv.Close()
	})
	return p, srv.URL + "/v1"
}

// fail makes the next n calls fail in mode (-1: all of them).
func (p *faultyProvider) fail(mode string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.left = mode, n
	p.calls.Store(0)
}

// next is the mode of the call arriving now.
func (p *faultyProvider) next() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.left == 0 {
		return "ok"
	}
	if p.left > 0 {
		p.left--
	}
	return p.mode
}

func (p *faultyProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.calls.Add(1)
	mode := p.next()
	switch mode {
	case "ok":
		p.model.ServeHTTP(w, r)
	case "status-429":
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"error":{"message":"slow down","type":"rate_limit_error"}}`, http.StatusTooManyRequests)
	case "status-500":
		http.Error(w, `{"error":{"message":"boom","type":"server_error"}}`, http.StatusInternalServerError)
	case "hang-before-headers":
		select {
		case <-r.Context().Done():
		case <-p.hung:
		}
	default:
		// The rest are faults in the answer itself: record the model's own
		// answer, then deliver it broken.
		rec := httptest.NewRecorder()
		p.model.ServeHTTP(rec, r)
		p.broken(w, r, mode, rec)
	}
}

func (p *faultyProvider) broken(w http.ResponseWriter, r *http.Request, mode string, rec *httptest.ResponseRecorder) {
	body := rec.Body.Bytes()
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	switch mode {
	case "invalid-json":
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body[:len(body)/2])
	case "cut-mid-body", "cut-mid-stream":
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body[:firstEvent(body)])
		_ = http.NewResponseController(w).Flush()
		// A connection reset, not a clean end.
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = conn.Close()
		}
	case "truncated-sse":
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body[:firstEvent(body)])
	case "hang-mid-stream":
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body[:firstEvent(body)])
		_ = http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-p.hung:
		}
	default:
		panic("unknown fault " + mode)
	}
}

// firstEvent is the end of an event stream's first event, or half of a
// JSON body.
func firstEvent(body []byte) int {
	if i := bytes.Index(body, []byte("\n\n")); i >= 0 && bytes.HasPrefix(bytes.TrimSpace(body), []byte("data:")) {
		return i + 2
	}
	return len(body) / 2
}

// perCallBound is the documented bound on provider calls per model call of
// a rollout attempt: the interception's 4 attempts plus the harness SDK's
// default 2 retries (README, "When the provider fails").
const perCallBound = 4 + 2

// TestProviderFaultsAreNeverTheAgents: a provider that cuts, hangs, says 429
// or 500, answers half a JSON object, truncates or cuts its stream. While
// the fault lasts a few calls, every rollout ends ok; while it lasts, each
// rollout ends as an infrastructure error, never as the agent's failure, and
// the provider is called within the documented bound.
func TestProviderFaultsAreNeverTheAgents(t *testing.T) {
	t.Parallel()
	p, baseURL := newFaultyProvider(t)
	srv := startServer(t)
	c := dial(t, srv.addr)
	defer c.Close()
	runs, queue := caseDir(t), "faults-provider"
	spawnEnv(t, []string{"OPENAI_API_KEY=" + providerKey}, "worker",
		"--address", srv.addr, "--runs-dir", runs, "--task-queue", queue, "--log-level", "warn",
		"--base-url", baseURL, "--upstream-header-timeout", "1s", "--upstream-idle-timeout", "1s")

	agent := filepath.Join(bin, "evalflow-agent")
	for _, tc := range []struct {
		fault  string
		stream bool
	}{
		{"cut-mid-body", false},
		{"hang-before-headers", false},
		{"status-429", false},
		{"status-500", false},
		{"invalid-json", false},
		{"cut-mid-stream", true},
		{"truncated-sse", true},
		{"hang-mid-stream", true},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			command := []string{agent}
			if !tc.stream {
				command = append(command, "--no-stream")
			}
			run := func(id string, tasks int64, attempts int) (workflows.Result, time.Duration) {
				cfg := evalConfig(id, tasks, 4)
				cfg.Harness.Command = command
				cfg.Limits.MaxAttempts = attempts
				started := time.Now()
				r := startEval(t, c, queue, cfg)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				var res workflows.Result
				require.NoError(t, r.Get(ctx, &res))
				return res, time.Since(started)
			}

			// A fault of a few calls: retried away, every rollout ok.
			p.fail(tc.fault, 3)
			res, took := run("transient-"+tc.fault, 4, workflows.DefaultMaxAttempts)
			recs, _ := stored(t, runs, "transient-"+tc.fault)
			assert.Equal(t, int64(4), res.OK, "every rollout ends ok once the fault clears: %+v", res.Errors)
			reruns := 0
			for _, r := range recs {
				if r.Attempt > 1 {
					reruns++
				}
			}
			transientCalls := p.calls.Load()

			// A fault that lasts: an infrastructure error, within the bound.
			p.fail(tc.fault, -1)
			res, persistTook := run("lasting-"+tc.fault, 1, 2)
			calls := p.calls.Load()
			if !assert.Equal(t, int64(1), res.Failed, "the lasting fault fails the rollout") {
				store, err := results.Open(runs)
				require.NoError(t, err)
				tr, err := store.Trace(context.Background(), "lasting-"+tc.fault, rollout.Key("lasting-"+tc.fault, 0, 0, 0))
				require.NoError(t, err)
				b, _ := json.MarshalIndent(tr, "", " ")
				t.Logf("trace: %s", tail(string(b), 6000))
				return
			}
			require.Len(t, res.Errors, 1)
			assert.Equal(t, rollout.KindInfra, res.Errors[0].Kind, "a provider fault is never the agent's: %+v", res.FailedSamples)
			assert.LessOrEqual(t, calls, int64(2*perCallBound), "2 attempts of one model call reach the provider at most %d times each", perCallBound)
			figure(t, "%s: 3 failing calls → 4/4 rollouts ok (%d ran again, %d provider calls, %s); lasting → %s after 2 attempts, "+
				"%d provider calls (bound %d), %s",
				tc.fault, reruns, transientCalls, took.Round(time.Millisecond), res.Errors[0].Kind, calls, 2*perCallBound, persistTook.Round(time.Millisecond))
		})
	}
	p.fail("ok", 0)
}

// providerKey is the provider's API key the suite's workers hold: it must
// never reach a history, log or run file.
const providerKey = "sk-faults-provider-key-5f1c2a9e7b3d4c6a"

// TestProviderHangLongerThanHarnessTimeout: a provider that accepts the call
// and never answers, with the worker's header timeout at its default
// (minutes) and a harness timeout of seconds. The harness is stopped at its
// timeout with its call still waiting: each attempt is the provider's
// failure, retried, and the rollout ends as infrastructure after its
// attempts, never as the agent's timeout.
func TestProviderHangLongerThanHarnessTimeout(t *testing.T) {
	t.Parallel()
	p, baseURL := newFaultyProvider(t)
	srv := startServer(t)
	c := dial(t, srv.addr)
	defer c.Close()
	runs, queue := caseDir(t), "faults-provider-hang"
	// No --upstream-header-timeout: the default, far longer than the harness's.
	spawnEnv(t, []string{"OPENAI_API_KEY=" + providerKey}, "worker",
		"--address", srv.addr, "--runs-dir", runs, "--task-queue", queue, "--log-level", "warn",
		"--base-url", baseURL)

	const harnessTimeout, attempts = 3 * time.Second, 2
	p.fail("hang-before-headers", -1)
	defer p.fail("ok", 0)
	id := "hang-past-harness-timeout"
	cfg := evalConfig(id, 2, 2)
	cfg.Harness.Command = []string{filepath.Join(bin, "evalflow-agent"), "--no-stream"}
	cfg.Harness.Timeout, cfg.Harness.TimeoutGiven = harnessTimeout, true
	cfg.Limits.MaxAttempts = attempts
	started := time.Now()
	r := startEval(t, c, queue, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var res workflows.Result
	require.NoError(t, r.Get(ctx, &res))
	took := time.Since(started)
	calls := p.calls.Load()

	assert.Equal(t, int64(2), res.Failed, "both rollouts fail while the provider hangs")
	assert.Zero(t, res.OK)
	for _, e := range res.Errors {
		assert.Equal(t, rollout.KindInfra, e.Kind, "a hung provider is never the agent's timeout: %+v", res.FailedSamples)
	}
	recs, _ := stored(t, runs, id)
	assert.Empty(t, recs, "nothing scored: no record of the agent's")
	store, err := results.Open(runs)
	require.NoError(t, err)
	for i := range int64(2) {
		key := rollout.Key(id, 0, i, 0)
		kept, err := store.Attempts(context.Background(), id, key)
		require.NoError(t, err)
		require.Len(t, kept, attempts, "%s: the trace of each of its attempts is kept", key)
		for _, tr := range kept {
			assert.True(t, tr.Harness.TimedOut, "%s: stopped at the harness timeout", key)
			assert.Contains(t, tr.Error, "timeout failure", "%s: ended as the provider's failure", key)
			require.NotEmpty(t, tr.Turns, key)
			last := tr.Turns[len(tr.Turns)-1]
			assert.Equal(t, 499, last.Status, "%s: its last call had no answer: %+v", key, last)
			assert.Zero(t, last.TTFT, "%s: no byte of an answer", key)
		}
	}
	assert.GreaterOrEqual(t, calls, int64(2*attempts), "every attempt reached the provider")
	figure(t, "provider hangs forever, harness timeout %s < header timeout 5m: 2 rollouts → %d %s after %d attempts each, %d provider calls, %s",
		harnessTimeout, res.Failed, rollout.KindInfra, attempts, calls, took.Round(time.Millisecond))
}
