package faults

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

// stopWithin is the bound on a worker's stop in every state: SIGTERM ends
// it within this, whatever it waits for.
const stopWithin = 10 * time.Second

// spawnService runs a worker process with its service flags and info logs
// (the start wait's lines), its output in logName.log.
func spawnService(t *testing.T, logName string, args ...string) *proc {
	t.Helper()
	base := []string{"--mock-error-rate", "0", "--log-level", "info", "--runs-dir", caseDir(t)}
	return spawnLogged(t, nil, logName, "worker", append(base, args...)...)
}

// logOf is what the process has written so far.
func logOf(t *testing.T, p *proc) string {
	t.Helper()
	b, err := os.ReadFile(p.log)
	require.NoError(t, err)
	return string(b)
}

// waitLog waits until the process's log holds line.
func waitLog(t *testing.T, p *proc, line string, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(logOf(t, p), line) },
		within, 20*time.Millisecond, "%s logs %q", p.name, line)
}

// terminate sends SIGTERM and requires the process to exit within
// stopWithin, and cleanly.
func terminate(t *testing.T, p *proc) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait(t, stopWithin), "%s exits 0 on SIGTERM", p.name)
}

// TestWorkerStopsWithinSecondsInEveryState: SIGTERM ends a worker within
// 10 s while it waits for Temporal, while it waits for its PostgreSQL
// store, and while it polls with nothing to do. (Draining a rollout:
// TestDrainedRolloutMovesToAnotherWorkerAtOnce.)
func TestWorkerStopsWithinSecondsInEveryState(t *testing.T) {
	t.Run("Temporal unreachable", func(t *testing.T) {
		w := spawnService(t, "worker", "--address", devtest.FreeAddr(t))
		waitLog(t, w, "waiting for Temporal at", time.Minute)
		terminate(t, w)
	})
	srv := startServer(t)
	t.Run("store unreachable", func(t *testing.T) {
		const password = "svc-closed-port-pw-5d1e"
		addSecret(t, "unreachable-store-password", password)
		w := spawnService(t, "worker", "--address", srv.addr, "--task-queue", "faults-service-store",
			"--store", "postgres://evalflow:"+password+"@"+devtest.FreeAddr(t)+"/evalflow?sslmode=disable")
		waitLog(t, w, "waiting for the run store", time.Minute)
		terminate(t, w)
		assert.NotContains(t, logOf(t, w), password)
	})
	t.Run("idle and polling", func(t *testing.T) {
		w := spawnService(t, "worker", "--address", srv.addr, "--task-queue", "faults-service-idle")
		waitLog(t, w, "worker started", time.Minute)
		terminate(t, w)
		assert.Contains(t, logOf(t, w), "msg=stopped")
	})
}

// TestWorkerGivesUpAfterTheStartTimeout: a worker whose Temporal never
// answers exits non-zero after --start-timeout, naming it, each attempt
// logged with its error and the next delay.
func TestWorkerGivesUpAfterTheStartTimeout(t *testing.T) {
	addr := devtest.FreeAddr(t)
	w := spawnService(t, "worker", "--address", addr, "--start-timeout", "2s")
	err := w.wait(t, time.Minute)
	require.Error(t, err, "the worker exits non-zero")
	out := logOf(t, w)
	assert.Contains(t, out, "Temporal at "+addr+" did not answer within the start timeout (--start-timeout")
	assert.GreaterOrEqual(t, strings.Count(out, "waiting for Temporal at "+addr), 2, "one line per attempt")
	assert.Contains(t, out, "next_attempt_in=")
}

// TestWorkerWaitsForTemporalToComeUp: a worker started before its Temporal
// server waits for it, logging its attempts, connects when it comes up and
// runs rollouts.
func TestWorkerWaitsForTemporalToComeUp(t *testing.T) {
	srv := newServer(t, caseDir(t))
	queue := "faults-service-wait"
	w := spawnService(t, "worker", "--address", srv.addr, "--task-queue", queue)
	waitLog(t, w, "waiting for Temporal at "+srv.addr, time.Minute)
	srv.start(t)
	waitLog(t, w, "worker started", time.Minute)
	out := logOf(t, w)
	assert.Contains(t, out, "Temporal at "+srv.addr+" answered")

	c := dial(t, srv.addr)
	defer c.Close()
	cfg := evalConfig("service-wait", 2, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res workflows.Result
	require.NoError(t, startEval(t, c, queue, cfg).Get(ctx, &res))
	assert.Equal(t, int64(2), res.OK)
	terminate(t, w)
}

// TestDrainedRolloutMovesToAnotherWorkerAtOnce: SIGTERM reaches a worker
// running a rollout that would go on for minutes. The worker stops polling,
// gives the rollout its --drain-timeout (or less, on a second SIGTERM),
// then hands it back and exits within 10 s; the rollout runs to its end on
// another worker, stored once. Its history shows the attempt failed by the
// stopping worker (ActivityTaskFailed, WorkerStopped), never timed out:
// with a 10-minute heartbeat timeout, a heartbeat-timeout tail could not go
// unnoticed.
func TestDrainedRolloutMovesToAnotherWorkerAtOnce(t *testing.T) {
	srv := startServer(t)
	c := dial(t, srv.addr)
	defer c.Close()
	for i, tc := range []struct {
		name, drain  string
		secondSignal bool
	}{
		{"drain timeout passes", "2s", false},
		{"second signal", "10m", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs, queue := caseDir(t), "faults-service-drain-"+itoa(i)
			// The first worker's model takes 10 minutes to answer.
			slow := spawnService(t, "slow-worker", "--address", srv.addr, "--task-queue", queue, "--runs-dir", runs,
				"--mock-latency", "10m", "--drain-timeout", tc.drain)
			waitLog(t, slow, "worker started", time.Minute)
			cfg := evalConfig("service-drain-"+itoa(i), 1, 1)
			cfg.Limits.HeartbeatTimeout = 10 * time.Minute
			run := startEval(t, c, queue, cfg)
			require.Eventually(t, func() bool { return runStarted(t, c, cfg.RunID) }, time.Minute, 50*time.Millisecond,
				"the rollout's Run runs on the slow worker")

			spawnService(t, "worker", "--address", srv.addr, "--task-queue", queue, "--runs-dir", runs, "--mock-latency", "100ms")
			stopped := time.Now()
			if tc.secondSignal {
				require.NoError(t, slow.cmd.Process.Signal(syscall.SIGTERM))
				waitLog(t, slow, "stopping: polling no more", stopWithin)
			}
			terminate(t, slow)
			stopTook := time.Since(stopped)
			assert.Contains(t, logOf(t, slow), "handed back")

			// Far less than the heartbeat timeout: the rollout moved at once.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var res workflows.Result
			require.NoError(t, run.Get(ctx, &res))
			ended := time.Since(stopped)
			assert.Equal(t, int64(1), res.OK)
			recs := requireExactlyOnce(t, runs, cfg.RunID, 1)
			assert.Equal(t, 2, recs[0].Attempt, "the second attempt, on the other worker, is stored")

			var failed, timedOut int
			it := c.GetWorkflowHistory(ctx, cfg.RunID, run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				require.NoError(t, err)
				switch ev.GetEventType() {
				case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
					f := ev.GetActivityTaskFailedEventAttributes().GetFailure()
					if info := f.GetApplicationFailureInfo(); info != nil && info.GetType() == rollout.ErrTypeWorkerStopped {
						failed++
						assert.False(t, info.GetNonRetryable())
						assert.Contains(t, f.GetMessage(), "the worker stopped")
					}
				case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
					timedOut++
				}
			}
			require.Eventually(t, func() bool { return agentsLeft(t) == 0 }, stopWithin, 20*time.Millisecond,
				"the handed-back rollout's harness is gone")
			assert.Equal(t, 1, failed, "the drained attempt ended by the stopping worker's failure")
			assert.Zero(t, timedOut, "no activity waited for a timeout")
			figure(t, "drained worker (--drain-timeout %s, second SIGTERM %v): exited %s after the first SIGTERM; its rollout (heartbeat timeout %s) stored on the other worker %s after it",
				tc.drain, tc.secondSignal, stopTook.Round(time.Millisecond), cfg.Limits.HeartbeatTimeout, ended.Round(time.Millisecond))
		})
	}
}

// runStarted reports whether the run's workflow has a Run activity running.
func runStarted(t *testing.T, c client.Client, workflowID string) bool {
	t.Helper()
	d, err := c.DescribeWorkflowExecution(context.Background(), workflowID, "")
	if err != nil {
		return false
	}
	for _, a := range d.GetPendingActivities() {
		if a.GetActivityType().GetName() == rollout.ActivityRun && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
			return true
		}
	}
	return false
}
