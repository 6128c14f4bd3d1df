package faults

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/engine/enginetest"
	"github.com/evalflow/evalflow/internal/harness/container"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

// engineOutage is how long the engine is gone mid-run.
const engineOutage = 2 * time.Minute

// TestEngineGoneTwoMinutesMidRun: the container engine a worker's
// sandboxes run on goes away for two minutes while its rollouts run (the
// worker reaches it through a gate the test closes; the engine's
// containers run on, as under Podman when its service stops). The
// rollouts wait for it without spending their attempts, run again once it
// is back, and are each stored once, scored as their agents did; no
// sandbox of the run is left.
func TestEngineGoneTwoMinutesMidRun(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	gate := enginetest.NewGate(t, eng)
	const tasks = 4
	root := sandboxTasks(t, tasks)
	srv := startServer(t)
	c := dial(t, srv.addr)
	defer c.Close()
	runs, queue := caseDir(t), "faults-engine-gone"
	worker := startWorkerEnv(t, []string{"DOCKER_HOST=" + gate.Host}, srv.addr, runs, queue,
		"--max-rollouts", "4", "--runtime", "docker", "--work-dir", t.TempDir())
	cfg := workflows.RunConfig{
		RunID: "engine-gone", Taskset: "harbor:" + root, MaxConcurrent: tasks, Model: "mock",
		Harness: rollout.HarnessConfig{Command: []string{"sh", "-c", "sleep 5; touch /app/done"}},
		Limits:  workflows.Limits{HeartbeatTimeout: 5 * time.Second, MaxAttempts: 2},
	}.WithDefaults()
	run := startEval(t, c, queue, cfg)

	ctx := context.Background()
	require.Eventually(t, func() bool {
		list, err := eng.ListContainers(ctx, container.LabelRun+"="+cfg.RunID)
		require.NoError(t, err)
		return len(list) == tasks
	}, 3*time.Minute, 50*time.Millisecond, "every rollout's sandbox starts")
	gate.Down()
	gone := time.Now()
	// The fault itself lasts its two minutes: nothing here waits for a
	// state, the outage is the case.
	time.Sleep(engineOutage)
	gate.Up()

	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	var res workflows.Result
	require.NoError(t, run.Get(ctx, &res))
	recs := requireExactlyOnce(t, runs, cfg.RunID, tasks)
	for _, r := range recs {
		assert.Equal(t, rollout.StatusOK, r.Status, "%s: %s", r.Key, r.Error)
		assert.Equal(t, 1.0, r.Reward, "%s is scored as its agent did", r.Key)
		assert.Greater(t, r.Attempt, cfg.Limits.MaxAttempts, "%s waited out the outage without spending its attempts", r.Key)
	}
	assert.Zero(t, res.Failed)
	// What the outage kept the worker from removing goes when the engine
	// answers again (TestSandboxesAnOutageLeftAreRemovedWhenTheEngineReturns),
	// and at the latest when the worker stops.
	running, err := eng.ListContainers(ctx, container.LabelRun+"="+cfg.RunID)
	require.NoError(t, err)
	terminate(t, worker)
	left, err := eng.ListContainers(ctx, container.LabelRun+"="+cfg.RunID)
	require.NoError(t, err)
	assert.Empty(t, left, "no sandbox of the run is left")
	var attempts []int
	for _, r := range recs {
		attempts = append(attempts, r.Attempt)
	}
	figure(t, "engine gone %s mid-run: %d/%d rollouts stored once, scored 1.0, attempts %v with %d allowed; %d containers of the run still running at its end, %d once the worker stopped; run ended %s after the engine went",
		engineOutage, len(recs), tasks, attempts, cfg.Limits.MaxAttempts, len(running), len(left), time.Since(gone).Round(time.Second))
}
