package faults

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/workflows"
)

// TestWorkerKilledMidRun: two worker processes share a run of 200
// rollouts; one is SIGKILLed halfway. Its rollouts move to the other within
// the heartbeat timeout and the run stores each rollout exactly once.
func TestWorkerKilledMidRun(t *testing.T) {
	srv := startServer(t)
	c := dial(t, srv.addr)
	defer c.Close()
	runs, queue := caseDir(t), "faults-kill-worker"
	doomed := startWorker(t, srv.addr, runs, queue, "--max-rollouts", "16")
	startWorker(t, srv.addr, runs, queue, "--max-rollouts", "16")
	cfg := evalConfig("kill-worker", 200, 32)
	run := startEval(t, c, queue, cfg)

	waitStored(t, runs, cfg.RunID, 100, 3*time.Minute)
	killed := time.Now()
	atKill := countStored(runs, cfg.RunID)
	doomed.kill()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var res workflows.Result
	require.NoError(t, run.Get(ctx, &res))
	ended := time.Now()
	recs := requireExactlyOnce(t, runs, cfg.RunID, 200)
	assert.Equal(t, int64(200), res.OK)

	// Rollouts whose Run died with the worker ran again (attempt 2): the
	// last of them to be stored says how long recovery took.
	var moved int
	var recovered time.Time
	for _, r := range recs {
		if r.Attempt > 1 {
			moved++
			if r.FinishedAt.After(recovered) {
				recovered = r.FinishedAt
			}
		}
	}
	figure(t, "worker SIGKILL at %d/200 stored: 200 stored, 0 duplicates, %d rollouts re-run on the other worker, "+
		"last of them stored %s after the kill (heartbeat timeout %s), run ended %s after the kill",
		atKill, moved, durationSince(killed, recovered), cfg.Limits.HeartbeatTimeout, ended.Sub(killed).Round(time.Millisecond))
}

// TestServerKilledAndRestarted: the Temporal server process is SIGKILLed
// halfway through a run and started again on its data; the workers ride
// it out and the run stores each rollout exactly once.
func TestServerKilledAndRestarted(t *testing.T) {
	srv := startServer(t)
	c := dial(t, srv.addr)
	runs, queue := caseDir(t), "faults-kill-server"
	startWorker(t, srv.addr, runs, queue, "--max-rollouts", "16")
	startWorker(t, srv.addr, runs, queue, "--max-rollouts", "16")
	cfg := evalConfig("kill-server", 200, 32)
	startEval(t, c, queue, cfg)
	c.Close()

	waitStored(t, runs, cfg.RunID, 100, 3*time.Minute)
	atKill := countStored(runs, cfg.RunID)
	killed := time.Now()
	srv.proc.kill()
	down := time.Now()
	srv.start(t)
	up := time.Now()
	waitStored(t, runs, cfg.RunID, atKill+1, 3*time.Minute)
	progress := time.Now()

	c = dial(t, srv.addr)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var res workflows.Result
	require.NoError(t, c.GetWorkflow(ctx, cfg.RunID, "").Get(ctx, &res))
	ended := time.Now()
	requireExactlyOnce(t, runs, cfg.RunID, 200)
	assert.Equal(t, int64(200), res.Rollouts)
	figure(t, "server SIGKILL at %d/200 stored: 200 stored, 0 duplicates; restarted %s after the kill, "+
		"next rollout stored %s after the restart, run ended %s after the kill",
		atKill, up.Sub(down).Round(time.Millisecond), progress.Sub(up).Round(time.Millisecond), ended.Sub(killed).Round(time.Millisecond))
}

// TestStarterKilledAndRerun: the starter with its embedded server and
// in-process worker is SIGKILLed halfway; the same command run again
// finishes the run, reusing what was stored, and no harness outlives the
// killed starter.
func TestStarterKilledAndRerun(t *testing.T) {
	dataDir, runs := caseDir(t), caseDir(t)
	addr := devtest.FreeAddr(t)
	args := []string{"eval", "--taskset", "arithmetic", "--tasks", "200", "--max-concurrent", "32",
		"--run-id", "kill-starter", "--address", addr, "--embedded", "--data-dir", dataDir, "--runs-dir", runs,
		"--ui-port", "-1", "--mock-latency", "100ms", "--mock-error-rate", "0"}
	first := spawn(t, "starter", args...)
	waitStored(t, runs, "kill-starter", 100, 3*time.Minute)
	atKill := countStored(runs, "kill-starter")
	killed := time.Now()
	first.kill()
	// Its harnesses die with it (local.Runtime's supervisor).
	require.Eventually(t, func() bool { return agentsLeft(t) == 0 }, time.Minute, 20*time.Millisecond,
		"no agent of the killed starter is left running")
	orphansGone := time.Now()

	again := spawn(t, "starter", args...)
	require.NoError(t, again.wait(t, 5*time.Minute), "the same command finishes the run")
	ended := time.Now()
	requireExactlyOnce(t, runs, "kill-starter", 200)
	// The embedded server is gone with the starter: serve its data again,
	// for the secret scan of its histories.
	newServer(t, dataDir).start(t)
	figure(t, "starter SIGKILL at %d/200 stored: 200 stored, 0 duplicates; its agents gone %s after the kill; "+
		"the rerun finished %s after the kill",
		atKill, orphansGone.Sub(killed).Round(time.Millisecond), ended.Sub(killed).Round(time.Millisecond))
}

func durationSince(from, to time.Time) time.Duration {
	if to.Before(from) {
		return 0
	}
	return to.Sub(from).Round(time.Millisecond)
}

// agentsLeft counts live processes of the suite's built-in agent binary.
func agentsLeft(t *testing.T) int {
	t.Helper()
	want := filepath.Join(bin, "evalflow-agent")
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && strings.TrimSuffix(exe, " (deleted)") == want {
			n++
		}
	}
	return n
}
