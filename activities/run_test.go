package activities_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/evalflow/evalflow/activities"
	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/internal/engine"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
	"github.com/evalflow/evalflow/tunnel"
)

// answeringModel is the model the fake provider names in its answers; runs
// ask for "mock".
const answeringModel = "gpt-4.1-2025-04-14"

// fakeUpstream answers chat completions with a fixed status.
type fakeUpstream struct {
	status atomic.Int64
	calls  atomic.Int64
}

var _ interception.Upstream = (*fakeUpstream)(nil)

func (u *fakeUpstream) Dialect() string { return dialects.NameChat }

func (u *fakeUpstream) Relay(_ context.Context, _ string, _ http.Header, _ dialects.Body) (*http.Response, int, error) {
	u.calls.Add(1)
	status := int(u.status.Load())
	body := `{"id":"c1","object":"chat.completion","created":0,"model":"` + answeringModel + `",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"The answer is 42."},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`
	if status != http.StatusOK {
		body = `{"error":{"message":"overloaded","type":"server_error"}}`
	}
	return &http.Response{
		StatusCode: status,
		Header:     http.Header{"Content-Type": {"application/json"}},
		Body:       io.NopCloser(strings.NewReader(body)),
	}, 1, nil
}

// fakeTunnel exposes servers on loopback; kill makes every exposure report
// itself dead, as a dropped frp or SSH connection does.
type fakeTunnel struct{ dead atomic.Bool }

func (t *fakeTunnel) BindHost() string { return "127.0.0.1" }

func (t *fakeTunnel) Expose(_ context.Context, host string, port int) (tunnel.Exposure, error) {
	return &fakeExposure{url: "http://" + net.JoinHostPort(host, fmt.Sprint(port)), tun: t}, nil
}

func (t *fakeTunnel) kill() { t.dead.Store(true) }

type fakeExposure struct {
	url string
	tun *fakeTunnel
}

func (e *fakeExposure) URL() string  { return e.url }
func (e *fakeExposure) Close() error { return nil }
func (e *fakeExposure) Err() error {
	if e.tun.dead.Load() {
		return errors.New("connection to the tunnel server dropped")
	}
	return nil
}

var _ tunnel.Watched = (*fakeExposure)(nil)

// fakeRuntime runs a Go function as the harness.
type fakeRuntime func(ctx context.Context, spec harness.Spec) (harness.Result, error)

func (f fakeRuntime) Run(ctx context.Context, spec harness.Spec) (harness.Result, error) {
	return f(ctx, spec)
}

// callModel makes one chat call through the interception server, as a
// harness does, and returns the status it got.
func callModel(ctx context.Context, spec harness.Spec) (int, error) {
	body := `{"model":"` + spec.Model + `","messages":[{"role":"user","content":"What is 6 times 7?"}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, spec.BaseURL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+spec.Secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// rig is one worker's activities on a real interception pool with a fake
// provider and tunnel, a fake harness runtime and a real run store.
type rig struct {
	acts  *activities.Activities
	env   *testsuite.TestActivityEnvironment
	store *results.Files
	up    *fakeUpstream
	tun   *fakeTunnel
}

func newRig(t *testing.T, h fakeRuntime) *rig {
	t.Helper()
	up := &fakeUpstream{}
	up.status.Store(http.StatusOK)
	r := newRigWith(t, up, h)
	r.up = up
	return r
}

// newRigWith is a rig whose interception servers call upstream.
func newRigWith(t *testing.T, upstream interception.Upstream, h fakeRuntime) *rig {
	t.Helper()
	store, err := results.Open(t.TempDir())
	require.NoError(t, err)
	r := &rig{store: store, tun: &fakeTunnel{}}
	pool := interception.NewPool(interception.Config{Upstream: upstream, Tunnel: r.tun, Multiplex: 4})
	t.Cleanup(func() { assert.NoError(t, pool.Close()) })
	r.acts = &activities.Activities{
		Pool: pool, Store: store, Tasksets: &activities.TasksetCache{},
		Runtime:   h,
		HostQueue: "host-1", Capacity: activities.NewCapacity(4), Logger: slog.New(slog.DiscardHandler),
	}
	var suite testsuite.WorkflowTestSuite
	r.env = suite.NewTestActivityEnvironment()
	r.env.RegisterActivity(r.acts)
	return r
}

func ref(attempt int) rollout.Ref {
	return rollout.Ref{
		RunID: "run", Epoch: 0, Index: 3, K: 0, Taskset: "sample", Model: "mock", Rubric: "numeric",
		Harness: rollout.HarnessConfig{Command: []string{"fake-harness"}, Timeout: time.Minute, MaxTurns: 4},
		Attempt: attempt,
	}
}

// rollout runs one attempt as the workflow does: Acquire, Expose, Run.
func (r *rig) rollout(t *testing.T, ref rollout.Ref) (rollout.Summary, error) {
	t.Helper()
	val, err := r.env.ExecuteActivity(r.acts.Acquire, rollout.AcquireInput{Rollout: ref})
	require.NoError(t, err)
	var slot rollout.AcquireResult
	require.NoError(t, val.Get(&slot))
	if slot.Done != nil {
		return *slot.Done, nil
	}
	val, err = r.env.ExecuteActivity(r.acts.Expose, rollout.ExposeInput{Key: ref.Key()})
	require.NoError(t, err)
	var exp rollout.ExposeResult
	require.NoError(t, val.Get(&exp))
	val, err = r.env.ExecuteActivity(r.acts.Run, rollout.RunInput{Rollout: ref, BaseURL: exp.BaseURL})
	if err != nil {
		return rollout.Summary{}, err
	}
	var s rollout.Summary
	require.NoError(t, val.Get(&s))
	return s, nil
}

func TestRunStoresASuccess(t *testing.T) {
	r := newRig(t, func(ctx context.Context, spec harness.Spec) (harness.Result, error) {
		for range 2 {
			status, err := callModel(ctx, spec)
			if err != nil || status != http.StatusOK {
				return harness.Result{ExitCode: 1, Stderr: fmt.Sprint(status, err)}, nil
			}
		}
		return harness.Result{Answer: spec.Task.Answer, Stdout: "done\n", Duration: 40 * time.Millisecond}, nil
	})
	ctx := context.Background()
	s, err := r.rollout(t, ref(1))
	require.NoError(t, err)

	key := ref(1).Key()
	assert.Equal(t, key, s.Key)
	assert.Equal(t, rollout.StatusOK, s.Status)
	assert.Equal(t, 1.0, s.Reward)
	assert.Equal(t, 2, s.Turns)
	assert.Equal(t, 24, s.InputTokens)
	assert.Equal(t, 10, s.OutputTokens)
	assert.False(t, s.Reused)
	assert.False(t, s.Rerun)
	assert.Equal(t, "traces/run~0~3~0/attempt-1.json", s.Trace)

	rec, ok, err := r.store.Get(ctx, "run", key)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, answeringModel, rec.Model, "the record names the model that answered, not the one asked for")
	assert.Equal(t, 1, rec.Attempt)
	tr, err := r.store.Trace(ctx, "run", key)
	require.NoError(t, err)
	require.Len(t, tr.Turns, 2)
	assert.Equal(t, "mock", tr.Turns[0].Request.Model, "the provider was asked for the run's model")
	assert.Equal(t, answeringModel, tr.Turns[1].Response.Model)
	assert.Equal(t, "done\n", tr.Harness.Stdout)
	assert.Zero(t, r.acts.Pool.Rollouts(), "the slot is released")

	// The same rollout again: the stored success is reused, nothing runs.
	calls := r.up.calls.Load()
	again, err := r.rollout(t, ref(1))
	require.NoError(t, err)
	assert.True(t, again.Reused)
	assert.Equal(t, calls, r.up.calls.Load())
}

// A harness that exits non-zero is the agent's failure: a result, recorded,
// not an error. Exit code 2 without reaching the turn limit is argparse's
// usage error, not a run out of turns.
func TestRunRecordsAHarnessExitAsATaskFailure(t *testing.T) {
	var secret string
	r := newRig(t, func(_ context.Context, spec harness.Spec) (harness.Result, error) {
		secret = spec.Secret
		return harness.Result{ExitCode: 2, Stderr: "env: OPENAI_API_KEY=" + spec.Secret + "\nusage: agent.py [-h] --task TASK\nagent.py: error: the following arguments are required: --task"}, nil
	})
	ctx := context.Background()
	s, err := r.rollout(t, ref(1))
	require.NoError(t, err)
	assert.Equal(t, rollout.StatusError, s.Status)
	assert.Equal(t, rollout.KindHarnessExit, s.ErrorKind)
	assert.Contains(t, s.Error, "arguments are required")
	assert.Zero(t, s.Reward)

	rec, ok, err := r.store.Get(ctx, "run", s.Key)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, rollout.KindHarnessExit, rec.ErrorKind)
	assert.Equal(t, "mock", rec.Model, "no turn named a model: the run's")
	tr, err := r.store.Trace(ctx, "run", s.Key)
	require.NoError(t, err)
	assert.Equal(t, 2, tr.Harness.ExitCode)
	require.NotEmpty(t, secret)
	assert.NotContains(t, tr.Harness.Stderr, secret, "the rollout secret is not stored")
	assert.Contains(t, tr.Harness.Stderr, "usage: agent.py")
}

// A harness stopped after the run's turn limit of model calls ran out of
// turns, whatever its exit code.
func TestRunRecordsTheTurnLimitFromTheTurnsSeen(t *testing.T) {
	r := newRig(t, func(ctx context.Context, spec harness.Spec) (harness.Result, error) {
		for range spec.MaxTurns {
			if _, err := callModel(ctx, spec); err != nil {
				return harness.Result{}, err
			}
		}
		return harness.Result{ExitCode: 1, Stderr: "still calling tools"}, nil
	})
	s, err := r.rollout(t, ref(1))
	require.NoError(t, err)
	assert.Equal(t, rollout.KindMaxTurns, s.ErrorKind)
	assert.Equal(t, 4, s.Turns)
}

// A harness that ignores the turn limit and keeps calling is refused by the
// interception server past it, and the rollout ends as limit:turns, the
// agent's outcome, whatever the harness made of the refusal.
func TestRunEnforcesTheTurnLimit(t *testing.T) {
	r := newRig(t, func(ctx context.Context, spec harness.Spec) (harness.Result, error) {
		for {
			status, err := callModel(ctx, spec)
			if err != nil {
				return harness.Result{}, err
			}
			if status != http.StatusOK {
				return harness.Result{Answer: spec.Task.Answer, Stderr: fmt.Sprint("model call: ", status)}, nil
			}
		}
	})
	s, err := r.rollout(t, ref(1))
	require.NoError(t, err, "a limit is the agent's result, not an error")
	assert.Equal(t, rollout.StatusError, s.Status)
	assert.Equal(t, rollout.KindLimit+trace.LimitTurns, s.ErrorKind)
	assert.Contains(t, s.Error, "rollout limit reached: 4 model calls (--max-turns 4)")
	assert.Equal(t, int64(4), r.up.calls.Load(), "the provider is not called past the limit")
	tr, err := r.store.Trace(context.Background(), "run", s.Key)
	require.NoError(t, err)
	require.Len(t, tr.Turns, 5)
	assert.Equal(t, trace.LimitTurns, tr.Turns[4].Limit)
}

func TestRunRecordsATimeout(t *testing.T) {
	r := newRig(t, func(ctx context.Context, spec harness.Spec) (harness.Result, error) {
		if _, err := callModel(ctx, spec); err != nil {
			return harness.Result{}, err
		}
		return harness.Result{ExitCode: -1, TimedOut: true, Duration: spec.Timeout}, nil
	})
	s, err := r.rollout(t, ref(1))
	require.NoError(t, err, "a timeout is the agent's result")
	assert.Equal(t, rollout.StatusError, s.Status)
	assert.Equal(t, rollout.KindTimeout, s.ErrorKind)
	assert.Equal(t, 1, s.Turns)
	rec, ok, err := r.store.Get(context.Background(), "run", s.Key)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, rollout.KindTimeout, rec.ErrorKind)
}

// A tunnel that died under the harness makes the attempt an infrastructure
// failure: retried, nothing scored, and the attempt's trace kept.
func TestRunTunnelLostIsRetriedNotScored(t *testing.T) {
	var r *rig
	r = newRig(t, func(ctx context.Context, spec harness.Spec) (harness.Result, error) {
		if _, err := callModel(ctx, spec); err != nil {
			return harness.Result{}, err
		}
		r.tun.kill()
		return harness.Result{ExitCode: 1, Stderr: "openai.APIConnectionError: Connection error."}, nil
	})
	_, err := r.rollout(t, ref(1))
	all := retriedUnscored(t, r, err, rollout.ErrTypeTunnel, ref(1))
	assert.Equal(t, 1, all[0].N)
	assert.Contains(t, all[0].Error, "tunnel lost")
	assert.Len(t, all[0].Turns, 1, "the turns before the tunnel died are kept")
	assert.Contains(t, all[0].Harness.Stderr, "APIConnectionError")
	assert.Zero(t, r.acts.Pool.Rollouts(), "the slot is released")
}

// A provider that kept failing is an infrastructure failure, retried, with
// the attempt's trace kept.
func TestRunUpstreamUnavailableIsRetried(t *testing.T) {
	r := newRig(t, func(ctx context.Context, spec harness.Spec) (harness.Result, error) {
		status, err := callModel(ctx, spec)
		if err != nil {
			return harness.Result{}, err
		}
		return harness.Result{ExitCode: 1, Stderr: fmt.Sprintf("openai.InternalServerError: %d", status)}, nil
	})
	r.up.status.Store(http.StatusServiceUnavailable)
	_, err := r.rollout(t, ref(2))
	all := retriedUnscored(t, r, err, rollout.ErrTypeUpstream, ref(2))
	assert.Contains(t, err.Error(), "503")
	assert.Equal(t, 2, all[0].N, "the workflow's attempt number")
	assert.Contains(t, all[0].Error, "kept failing")
	require.Len(t, all[0].Turns, 1)
	assert.Equal(t, http.StatusServiceUnavailable, all[0].Turns[0].Status)
}

func TestRunRuntimeFailureIsRetried(t *testing.T) {
	r := newRig(t, func(context.Context, harness.Spec) (harness.Result, error) {
		return harness.Result{}, errors.New("create workdir: no space left on device")
	})
	_, err := r.rollout(t, ref(1))
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, rollout.ErrTypeRuntime, appErr.Type())
	assert.False(t, appErr.NonRetryable(), "the workflow retries it")
	all, err := r.store.Attempts(context.Background(), "run", ref(1).Key())
	require.NoError(t, err)
	require.Len(t, all, 1)
	assert.Contains(t, all[0].Error, "no space left on device")
}

// A container engine that cannot be reached is neither the agent's nor a
// plain runtime failure: the workflow waits it out (rollout.ErrTypeEngine).
func TestRunEngineGoneIsWaitedFor(t *testing.T) {
	r := newRig(t, func(context.Context, harness.Spec) (harness.Result, error) {
		return harness.Result{}, fmt.Errorf("inspect image x: %w", &engine.UnavailableError{Host: "unix:///run/podman/podman.sock", Err: syscall.ECONNREFUSED})
	})
	_, err := r.rollout(t, ref(1))
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, rollout.ErrTypeEngine, appErr.Type())
	assert.False(t, appErr.NonRetryable())
	assert.Contains(t, err.Error(), "the container engine could not be reached")
}

// A run store that cannot be written fails the attempt with an error the
// workflow retries; nothing is recorded half, and the next attempt stores
// the rollout once the store works again.
func TestRunStoreFailureIsRetriedAndLosesNothing(t *testing.T) {
	r := newRig(t, func(ctx context.Context, spec harness.Spec) (harness.Result, error) {
		if _, err := callModel(ctx, spec); err != nil {
			return harness.Result{}, err
		}
		return harness.Result{Answer: spec.Task.Answer}, nil
	})
	ctx := context.Background()
	// The traces directory cannot be made: a file stands in its way.
	require.NoError(t, os.MkdirAll(r.store.Dir("run"), 0o755))
	blocker := filepath.Join(r.store.Dir("run"), "traces")
	require.NoError(t, os.WriteFile(blocker, nil, 0o644))

	_, err := r.rollout(t, ref(1))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "write run store")
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.False(t, appErr.NonRetryable(), "a store failure is retried")
	assert.Zero(t, r.acts.Pool.Rollouts(), "the slot is released")

	require.NoError(t, os.Remove(blocker))
	s, err := r.rollout(t, ref(2))
	require.NoError(t, err)
	assert.Equal(t, rollout.StatusOK, s.Status)
	assert.Equal(t, 1.0, s.Reward)
	recs, err := r.store.List(ctx, "run")
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, 2, recs[0].Attempt)
}

// A run that reruns failures runs a stored failure again and says so; one
// that does not reuses it.
func TestRunRerunsAStoredFailureWhenAsked(t *testing.T) {
	exit := 1
	r := newRig(t, func(_ context.Context, spec harness.Spec) (harness.Result, error) {
		return harness.Result{ExitCode: exit, Answer: spec.Task.Answer}, nil
	})
	first, err := r.rollout(t, ref(1))
	require.NoError(t, err)
	require.Equal(t, rollout.KindHarnessExit, first.ErrorKind)

	kept, err := r.rollout(t, ref(1))
	require.NoError(t, err)
	assert.True(t, kept.Reused, "without RetryFailed a stored failure stands")
	assert.Equal(t, rollout.KindHarnessExit, kept.ErrorKind)

	exit = 0
	rerun := ref(1) // a rerun of the same run id numbers its attempts from 1 again
	rerun.RetryFailed = true
	s, err := r.rollout(t, rerun)
	require.NoError(t, err)
	assert.True(t, s.Rerun)
	assert.False(t, s.Reused)
	assert.Equal(t, rollout.StatusOK, s.Status)
	assert.Equal(t, "traces/run~0~3~0/attempt-2.json", s.Trace, "the rerun's trace is stored beside the failure's")
	all, err := r.store.Attempts(context.Background(), "run", rerun.Key())
	require.NoError(t, err)
	require.Len(t, all, 2)
	assert.Equal(t, 1, all[0].Harness.ExitCode)
}

// An interception server that cannot listen on the custom tunnel's fixed
// port is a configuration error that fails the run with the reason, not a
// failure retried forever.
func TestAcquireFixedPortInUseIsAConfigError(t *testing.T) {
	busy, err := net.Listen("tcp", "0.0.0.0:0")
	require.NoError(t, err)
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	store, err := results.Open(t.TempDir())
	require.NoError(t, err)
	pool := interception.NewPool(interception.Config{Upstream: &fakeUpstream{}, Tunnel: tunnel.Custom{URL: "http://evalflow.example:8000", Port: port}})
	defer pool.Close()
	acts := &activities.Activities{Pool: pool, Store: store, Tasksets: &activities.TasksetCache{}, Capacity: activities.NewCapacity(1)}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)

	_, err = env.ExecuteActivity(acts.Acquire, rollout.AcquireInput{Rollout: ref(1)})
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, rollout.ErrTypeConfig, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	assert.Contains(t, err.Error(), fmt.Sprintf("port %d is in use", port))
	assert.Zero(t, activities.OpenLeases(acts), "its lease is closed")
	// The capacity it took is given back.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = acts.Capacity.Take(ctx, func() {})
	require.NoError(t, err)
}

// A harness's session logs are stored with its trace, without the rollout
// secret.
func TestRunKeepsSessionLogs(t *testing.T) {
	r := newRig(t, func(ctx context.Context, spec harness.Spec) (harness.Result, error) {
		return harness.Result{Answer: spec.Task.Answer, SessionLogs: []harness.SessionLog{
			{Name: "sessions/rollout-1.jsonl", Content: `{"type":"session_meta","key":"` + spec.Secret + `"}` + "\n", Truncated: true},
		}}, nil
	})
	s, err := r.rollout(t, ref(1))
	require.NoError(t, err)
	tr, err := r.store.Trace(context.Background(), "run", s.Key)
	require.NoError(t, err)
	assert.Equal(t, []trace.SessionLog{
		{Name: "sessions/rollout-1.jsonl", Content: `{"type":"session_meta","key":"[rollout secret]"}` + "\n", Truncated: true},
	}, tr.Harness.SessionLogs)
}

// A harness that cannot run as configured (a packaged harness npm cannot
// install) fails the run with its reason, not retried.
func TestRunFailsOnAHarnessConfigError(t *testing.T) {
	r := newRig(t, func(context.Context, harness.Spec) (harness.Result, error) {
		return harness.Result{}, &harness.ConfigError{Err: errors.New("install @openai/codex@0.169.0: npm install failed")}
	})
	_, err := r.rollout(t, ref(1))
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, rollout.ErrTypeConfig, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	assert.Contains(t, err.Error(), "install @openai/codex@0.169.0: npm install failed")
}

// A rollout whose calls cost its --max-cost is refused the next call, and
// ends as limit:cost, the agent's outcome; its record and summary carry
// what the calls cost at the bundled price of the model that answered (a
// dated snapshot of gpt-4.1: $2 and $8 per million tokens).
func TestRunEnforcesTheCostLimit(t *testing.T) {
	r := newRig(t, func(ctx context.Context, spec harness.Spec) (harness.Result, error) {
		for {
			status, err := callModel(ctx, spec)
			if err != nil {
				return harness.Result{}, err
			}
			if status != http.StatusOK {
				return harness.Result{Answer: spec.Task.Answer, Stderr: fmt.Sprint("model call: ", status)}, nil
			}
		}
	})
	in := ref(1)
	in.Harness.MaxTurns = 0
	in.Harness.MaxCostUSD = 0.0001
	s, err := r.rollout(t, in)
	require.NoError(t, err, "a limit is the agent's result, not an error")
	assert.Equal(t, rollout.StatusError, s.Status)
	assert.Equal(t, rollout.KindLimit+trace.LimitCost, s.ErrorKind)
	assert.Contains(t, s.Error, "(--max-cost 0.0001)")
	assert.Equal(t, int64(2), r.up.calls.Load(), "the provider is not called past the limit")
	perCall := (12*2.0 + 5*8.0) / 1e6
	assert.InDelta(t, 2*perCall, s.CostUSD, 1e-12, "the summary carries the rollout's cost")
	assert.Zero(t, s.UnpricedTurns)

	rec, ok, err := r.store.Get(context.Background(), "run", s.Key)
	require.NoError(t, err)
	require.True(t, ok)
	assert.InDelta(t, 2*perCall, rec.CostUSD, 1e-12, "the record carries it")
	tr, err := r.store.Trace(context.Background(), "run", s.Key)
	require.NoError(t, err)
	require.Len(t, tr.Turns, 3)
	require.NotNil(t, tr.Turns[0].CostUSD)
	assert.InDelta(t, perCall, *tr.Turns[0].CostUSD, 1e-12)
	assert.Equal(t, trace.LimitCost, tr.Turns[2].Limit)
}

// retriedUnscored checks that a rollout's error is a retryable errType, that
// nothing was scored for in, and that one attempt was kept; it returns the
// attempts.
func retriedUnscored(t *testing.T, r *rig, err error, errType string, in rollout.Ref) []results.Attempt {
	t.Helper()
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, errType, appErr.Type())
	assert.False(t, appErr.NonRetryable(), "the workflow retries it")

	ctx := context.Background()
	_, ok, err := r.store.Get(ctx, "run", in.Key())
	require.NoError(t, err)
	assert.False(t, ok, "nothing is scored")
	all, err := r.store.Attempts(ctx, "run", in.Key())
	require.NoError(t, err)
	require.Len(t, all, 1)
	return all
}
