package faults

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

// TestWorkerKilledDuringVerification: the worker running a task's verifier
// is SIGKILLed while the verifier runs. Its workspace is gone with it, so
// the attempt fails as infrastructure (Verify's heartbeat times out) and the
// rollout runs again, agent and verifier, on the other worker: stored once,
// the verifier's retry visible in the history.
func TestWorkerKilledDuringVerification(t *testing.T) {
	root, marks := t.TempDir(), t.TempDir()
	started := filepath.Join(marks, "verifier-started")
	task := filepath.Join(root, "slow-verifier")
	require.NoError(t, os.MkdirAll(filepath.Join(task, "tests"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(task, "instruction.md"), []byte("Task slow-verifier: do nothing.\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(task, "task.toml"), []byte("version = \"1.0\"\n\n[verifier]\ntimeout_sec = 120.0\n"), 0o644))
	// The first run says it started and hangs until its worker is killed;
	// the next writes a reward at once.
	test := "#!/bin/bash\nif [ -e " + started + " ]; then echo 1 > \"$EVALFLOW_VERIFIER_LOGS/reward.txt\"; exit 0; fi\ntouch " + started + "\nsleep 120\n"
	require.NoError(t, os.WriteFile(filepath.Join(task, "tests", "test.sh"), []byte(test), 0o755))

	srv := startServer(t)
	c := dial(t, srv.addr)
	defer c.Close()
	runs, queue := t.TempDir(), "faults-kill-verifier"
	// A killed worker leaves its workspaces: keep them in the test's dir.
	doomed := startWorker(t, srv.addr, runs, queue, "--max-rollouts", "2", "--work-dir", t.TempDir())
	cfg := workflows.RunConfig{
		RunID: "kill-verifier", Taskset: "harbor:" + root, MaxConcurrent: 1, Model: "mock",
		Harness: rollout.HarnessConfig{Command: []string{"true"}},
		Limits:  workflows.Limits{HeartbeatTimeout: 5 * time.Second},
	}.WithDefaults()
	run := startEval(t, c, queue, cfg)

	require.Eventually(t, func() bool { _, err := os.Stat(started); return err == nil }, 3*time.Minute, 20*time.Millisecond,
		"the verifier starts on the first worker")
	startWorker(t, srv.addr, runs, queue, "--max-rollouts", "2", "--work-dir", t.TempDir())
	killed := time.Now()
	doomed.kill()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var res workflows.Result
	require.NoError(t, run.Get(ctx, &res))
	ended := time.Now()
	recs := requireExactlyOnce(t, runs, cfg.RunID, 1)
	assert.Equal(t, int64(1), res.OK)
	assert.Equal(t, 1.0, recs[0].Reward, "the verifier's reward, from the second worker")
	assert.Equal(t, 2, recs[0].Attempt, "the rollout ran again")

	var verifies, timedOut int
	it := c.GetWorkflowHistory(ctx, cfg.RunID, run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	scheduled := map[int64]string{}
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			scheduled[ev.GetEventId()] = a.GetActivityType().GetName()
			if a.GetActivityType().GetName() == rollout.ActivityVerify {
				verifies++
			}
		}
		if a := ev.GetActivityTaskTimedOutEventAttributes(); a != nil && scheduled[a.GetScheduledEventId()] == rollout.ActivityVerify {
			timedOut++
		}
	}
	assert.Equal(t, 2, verifies, "Verify ran on the killed worker, then again")
	assert.Equal(t, 1, timedOut, "the killed worker's Verify timed out on its heartbeat")
	figure(t, "worker SIGKILL during verification: stored once (attempt 2), Verify scheduled twice, run ended %s after the kill (heartbeat timeout %s)",
		ended.Sub(killed).Round(time.Millisecond), cfg.Limits.HeartbeatTimeout)
}
