package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/internal/logtest"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/providers/mock/mocktest"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/tunnel"
	"github.com/evalflow/evalflow/tunnel/tunneltest"
	"github.com/evalflow/evalflow/workflows"
)

// Bounds of waits for a server side to catch up; never reached when it works.
const (
	tunnelWait = 30 * time.Second
	tunnelTick = 10 * time.Millisecond
)

// remoteRuntime is a recording runtime whose harnesses count as remote: the
// worker exposes its servers through the configured tunnel. It remembers the
// base URLs it was handed.
type remoteRuntime struct {
	*recordingRuntime
	mu   sync.Mutex
	urls map[string]bool
}

var _ harness.Remote = (*remoteRuntime)(nil)

func newRemoteRuntime(inner harness.Runtime) *remoteRuntime {
	r := newRecordingRuntime()
	r.inner = inner
	return &remoteRuntime{recordingRuntime: r, urls: map[string]bool{}}
}

func (*remoteRuntime) Remote() bool { return true }

func (r *remoteRuntime) Run(ctx context.Context, spec harness.Spec) (harness.Result, error) {
	r.mu.Lock()
	r.urls[spec.BaseURL] = true
	r.mu.Unlock()
	return r.recordingRuntime.Run(ctx, spec)
}

func (r *remoteRuntime) baseURLs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for u := range r.urls {
		out = append(out, u)
	}
	return out
}

// newNetns makes a network namespace that reaches this host only at its veth
// address, or skips the test.
func newNetns(t *testing.T, subnet string) *local.Netns {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("iproute2 is not installed")
	}
	n, err := local.NewNetns(context.Background(), subnet, local.Runtime{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, n.Close()) })
	return n
}

type tunnelRun struct {
	queue   string
	tun     tunnel.Tunnel
	rt      harness.Runtime
	tasks   int
	latency time.Duration
	// health is the monitor's interval.
	health time.Duration
	// during runs once some rollouts are stored.
	during func()
	// concurrency is rollouts in flight (16 when 0); multiplex is rollouts per
	// server (4 when 0).
	concurrency, multiplex int
	// upstream is the model's base URL (…/v1); the mock with latency when
	// empty, so rollouts are in flight.
	upstream string
}

// runThroughTunnel runs an eval on a worker whose harnesses reach it only
// through tun, and returns the result, the workflow's histories and the
// worker's log. The worker is stopped.
func runThroughTunnel(t *testing.T, c client.Client, r tunnelRun) (workflows.Result, []string, string) {
	t.Helper()
	if r.upstream == "" {
		_, r.upstream = mocktest.Serve(t, mock.Config{Model: "mock-e2e", Latency: r.latency})
	}
	runsDir := t.TempDir()
	if r.concurrency == 0 {
		r.concurrency = 16
	}
	if r.multiplex == 0 {
		r.multiplex = 4
	}
	logs := &logtest.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("worker log:\n%s", logs.String())
		}
	})
	w, err := wiring.NewWorker(c, wiring.Config{
		TaskQueue: r.queue, RunsDir: runsDir, BaseURL: r.upstream,
		MaxRollouts: r.concurrency, Multiplex: r.multiplex, Runtime: r.rt,
		DefaultHarness: agentCommand,
		Interception:   wiring.Interception{Use: r.tun, HealthInterval: r.health},
		Logger:         slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)
	require.NoError(t, w.Start())
	stopped := false
	defer func() {
		if !stopped {
			w.Stop()
		}
	}()

	runID := "tunnel-" + r.queue
	cfg := workflows.RunConfig{
		RunID: runID, Taskset: "sample", Tasks: int64(r.tasks), MaxConcurrent: r.concurrency, Model: "mock-e2e",
		Limits: workflows.Limits{HeartbeatTimeout: 10 * time.Second, MaxAttempts: 4},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: runID, TaskQueue: r.queue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE}, wiring.EvalWorkflowName, workflows.EvalInput{Config: cfg})
	require.NoError(t, err)
	if r.during != nil {
		store := storetest.Files(t, runsDir)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			recs, err := store.List(ctx, runID)
			require.NoError(c, err)
			assert.GreaterOrEqual(c, len(recs), 4)
		}, 5*time.Minute, 20*time.Millisecond, "rollouts stored before the tunnel is disturbed")
		r.during()
	}
	var res workflows.Result
	require.NoError(t, c.GetWorkflow(ctx, runID, "").Get(ctx, &res))
	w.Stop()
	stopped = true
	return res, histories(t, c, runID, run.GetRunID()), logs.String()
}

func TestEvalFromNetnsThroughTunnel(t *testing.T) {
	skipShort(t)
	_, c := devtest.StartEvalflow(t)
	tests := []struct {
		name, subnet string
		// setup starts the server side reachable from n and returns the
		// tunnel and how many forwards the server side holds (nil: unknown).
		setup func(t *testing.T, n *local.Netns) (tunnel.Tunnel, func() int, string)
	}{
		{"frp", "10.213.10.0", func(t *testing.T, n *local.Netns) (tunnel.Tunnel, func() int, string) {
			frps := tunneltest.StartFRPSOn(t, n.HostIP)
			return &tunnel.FRP{ServerAddr: frps.Addr, ServerPort: frps.Port, Token: frps.Token}, func() int {
				online, err := frps.OnlineProxies()
				require.NoError(t, err)
				return len(online)
			}, frps.Token
		}},
		{"ssh", "10.213.11.0", func(t *testing.T, n *local.Netns) (tunnel.Tunnel, func() int, string) {
			sshd := tunneltest.StartSSHD(t)
			key, err := os.ReadFile(sshd.KeyFile)
			require.NoError(t, err)
			return &tunnel.SSH{
				Addr: sshd.Addr, User: sshd.User, KeyFile: sshd.KeyFile, KnownHostsFile: sshd.KnownHostsFile,
				RemoteBind: n.HostIP, PublicHost: n.HostIP,
			}, nil, strings.Split(string(key), "\n")[1]
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNetns(t, tt.subnet)
			tun, held, credential := tt.setup(t, n)
			rt := newRemoteRuntime(n)
			res, hs, log := runThroughTunnel(t, c, tunnelRun{queue: "netns-" + tt.name, tun: tun, rt: rt, tasks: 16})

			assert.Equal(t, int64(16), res.Rollouts)
			assert.Equal(t, int64(16), res.OK, "every rollout reached the model through the tunnel: %+v", res.Errors)
			assert.Positive(t, res.Turns)
			urls := rt.baseURLs()
			assert.NotEmpty(t, urls)
			assert.LessOrEqual(t, len(urls), 4, "at most one tunnel per server")
			for _, u := range urls {
				assert.True(t, strings.HasPrefix(u, "http://"+n.HostIP+":"), "harness base URL %s is the tunnel's", u)
				pu, err := url.Parse(u)
				require.NoError(t, err)
				require.Eventually(t, func() bool { return !tunneltest.Listening(pu.Host) }, tunnelWait, tunnelTick, "%s still listens after the worker stopped", pu.Host)
			}
			if held != nil {
				require.Eventually(t, func() bool { return held() == 0 }, tunnelWait, tunnelTick, "proxies online at frps after the worker stopped")
			}
			secrets := append(rt.allSecrets(), credential)
			requireNoSecret(t, "workflow history", hs, secrets)
			requireNoSecret(t, "worker log", []string{log}, secrets)
		})
	}
}

func TestEvalAllInFlightThroughFRP(t *testing.T) {
	skipShort(t)
	_, c := devtest.StartEvalflow(t)
	n := newNetns(t, "10.213.13.0")
	frps := tunneltest.StartFRPSOn(t, n.HostIP)
	tun := &tunnel.FRP{ServerAddr: frps.Addr, ServerPort: frps.Port, Token: frps.Token}

	// The model holds every first call until all rollouts have made one, so
	// all are in flight at once; frps is asked then what it holds.
	const rollouts, multiplex = 128, 32
	var calls atomic.Int64
	gate := make(chan struct{})
	var (
		mu        sync.Mutex
		during    []string
		duringErr error
	)
	m, err := mock.New(mock.Config{Model: "mock-e2e"})
	require.NoError(t, err)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == rollouts {
			mu.Lock()
			during, duringErr = frps.OnlineProxies()
			mu.Unlock()
			close(gate)
		}
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		m.ServeHTTP(w, r)
	}))
	t.Cleanup(upstream.Close)

	res, _, _ := runThroughTunnel(t, c, tunnelRun{
		queue: "frp-all", tun: tun, rt: newRemoteRuntime(n), tasks: rollouts,
		concurrency: rollouts, multiplex: multiplex, upstream: upstream.URL + "/v1",
	})

	assert.Equal(t, int64(rollouts), res.OK, "%+v %+v", res.Errors, res.FailedSamples)
	mu.Lock()
	defer mu.Unlock()
	require.NoError(t, duringErr)
	assert.Len(t, during, rollouts/multiplex, "proxies online at frps with every rollout in flight")
	require.Eventually(t, func() bool {
		online, err := frps.OnlineProxies()
		return err == nil && len(online) == 0
	}, tunnelWait, tunnelTick, "proxies online at frps after the run")
	t.Logf("%d rollouts through frp: %d proxies while all ran, 0 after; wall %s", rollouts, len(during), res.WallTime)
}

func TestEvalSurvivesTunnelLoss(t *testing.T) {
	skipShort(t)
	_, c := devtest.StartEvalflow(t)
	n := newNetns(t, "10.213.12.0")
	frps := tunneltest.StartFRPSOn(t, n.HostIP)
	tun := &tunnel.FRP{ServerAddr: frps.Addr, ServerPort: frps.Port, Token: frps.Token}
	res, hs, _ := runThroughTunnel(t, c, tunnelRun{
		queue: "loss", tun: tun, rt: newRemoteRuntime(n), tasks: 32,
		latency: 200 * time.Millisecond, health: 200 * time.Millisecond,
		during: frps.Restart, // every tunnel dies under the rollouts using it
	})

	assert.Equal(t, int64(32), res.Rollouts)
	assert.Equal(t, int64(32), res.OK, "every rollout succeeds on retry, none is scored as an agent failure: %+v", res.Errors)
	assert.Empty(t, res.Errors)
	tunnelFailures := 0
	for _, h := range hs {
		tunnelFailures += strings.Count(h, `"type":"TunnelError"`)
	}
	t.Logf("%d tunnel failures in the history", tunnelFailures)
	assert.Positive(t, tunnelFailures, "rollouts cut off by the loss failed with the tunnel error type")
}

// flakyTunnel fails its first failures creations, then exposes like inner.
type flakyTunnel struct {
	tunnel.Tunnel
	failures int32
	calls    atomic.Int32
}

func (f *flakyTunnel) Expose(ctx context.Context, host string, port int) (tunnel.Exposure, error) {
	if f.calls.Add(1) <= f.failures {
		return nil, &tunnel.Error{Tunnel: "flaky", Op: "expose", Err: errors.New("server not ready")}
	}
	return f.Tunnel.Expose(ctx, host, port)
}

func TestExposeRetriesInHistory(t *testing.T) {
	skipShort(t)
	_, c := devtest.StartEvalflow(t)
	tun := &flakyTunnel{Tunnel: tunnel.Local{}, failures: 2}
	res, hs, _ := runThroughTunnel(t, c, tunnelRun{queue: "flaky", tun: tun, rt: newRemoteRuntime(&local.Runtime{}), tasks: 1})

	assert.Equal(t, int64(1), res.OK, "the rollout succeeds once the tunnel comes up")
	assert.Equal(t, int32(3), tun.calls.Load())
	// The Expose activity's retries are in the history: its start event
	// records the attempt and the last failure.
	joined := strings.Join(hs, "\n")
	assert.Contains(t, joined, `"attempt":3`)
	assert.Contains(t, joined, `"type":"TunnelError"`)
	assert.Contains(t, joined, fmt.Sprintf("%q", "Expose"))
}
