package activities_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/evalflow/evalflow/activities"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/tunnel"
	"github.com/evalflow/evalflow/tunnel/tunneltest"
)

// A harness whose frp tunnel dies while it runs is stopped as soon as the
// pool's monitor finds the tunnel dead, not at its own timeout, and the
// attempt is a TunnelError: retried, never scored as the agent's failure.
func TestRunStopsAHarnessWhoseTunnelDied(t *testing.T) {
	const interval = 200 * time.Millisecond
	frps := tunneltest.StartFRPS(t)
	store, err := results.Open(t.TempDir())
	require.NoError(t, err)
	up := &fakeUpstream{}
	up.status.Store(200)
	pool := interception.NewPool(interception.Config{
		Upstream: up, Multiplex: 4,
		Tunnel: &tunnel.FRP{ServerAddr: frps.Addr, ServerPort: frps.Port, Token: frps.Token},
	})
	t.Cleanup(func() { assert.NoError(t, pool.Close()) })
	pool.StartMonitor(interval)
	r := &rig{store: store}
	r.acts = &activities.Activities{
		Pool: pool, Store: store, Tasksets: &activities.TasksetCache{},
		Runtime:   &local.Runtime{Dir: t.TempDir()},
		HostQueue: "host-1", Capacity: activities.NewCapacity(4), Logger: slog.New(slog.DiscardHandler),
	}
	var suite testsuite.WorkflowTestSuite
	r.env = suite.NewTestActivityEnvironment()
	r.env.RegisterActivity(r.acts)

	// The harness makes a model call through the tunnel, says it is up,
	// then blocks far longer than the test waits.
	out := t.TempDir()
	ref := ref(1)
	ref.Harness.Timeout = 10 * time.Minute
	ref.Harness.Command = []string{"sh", "-c", `
		code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $OPENAI_API_KEY" \
			-H 'Content-Type: application/json' -d '{"model":"m","messages":[{"role":"user","content":"hi"}]}' \
			"$OPENAI_BASE_URL/chat/completions")
		echo "$code" > "$OUT/code"
		echo $$ > "$OUT/ready"
		exec sleep 600`}
	ref.Harness.Env = []string{"OUT=" + out}

	// The harness writes its pid to a FIFO: reading it waits for the harness.
	require.NoError(t, syscall.Mkfifo(filepath.Join(out, "ready"), 0o600))
	killed := make(chan time.Time, 1)
	pids := make(chan string, 1)
	go func() {
		b, err := os.ReadFile(filepath.Join(out, "ready"))
		if err != nil {
			pids <- ""
			return
		}
		pids <- string(b)
		frps.Kill()
		killed <- time.Now()
	}()
	_, err = r.rollout(t, ref)
	ended := time.Now()

	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, rollout.ErrTypeTunnel, appErr.Type())
	assert.False(t, appErr.NonRetryable(), "the workflow retries it")
	assert.Contains(t, err.Error(), tunnel.ErrDead.Error(), "the cause: the tunnel the monitor found dead")

	code, rerr := os.ReadFile(filepath.Join(out, "code"))
	require.NoError(t, rerr)
	assert.Equal(t, "200", strings.TrimSpace(string(code)), "the harness reached its model through the tunnel first")
	var at time.Time
	select {
	case at = <-killed:
	case <-time.After(time.Minute):
		t.Fatal("the harness never said it was up")
	}
	t.Logf("harness stopped %s after its tunnel was killed", ended.Sub(at))
	assert.Less(t, ended.Sub(at), 30*time.Second, "stopped at the monitor's finding (every %s), not after the harness's 10 minutes", interval)

	pid, rerr := strconv.Atoi(strings.TrimSpace(<-pids))
	require.NoError(t, rerr)
	assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "the harness process is gone")

	ctx := t.Context()
	_, stored, gerr := store.Get(ctx, "run", ref.Key())
	require.NoError(t, gerr)
	assert.False(t, stored, "nothing is scored: no record, so no agent failure")
	attempts, gerr := store.Attempts(ctx, "run", ref.Key())
	require.NoError(t, gerr)
	require.Len(t, attempts, 1, "the attempt's trace is kept")
	assert.Contains(t, attempts[0].Error, "tunnel lost")
	assert.Len(t, attempts[0].Turns, 1, "the model call before the tunnel died is kept")
	requireReleased(t, r, ref.Key())
}
