package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/engine"
	"github.com/evalflow/evalflow/internal/engine/enginetest"
	"github.com/evalflow/evalflow/internal/harness/container"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

// TestWorkerKilledLeavesNoSandbox: a worker of the container runtime is
// SIGKILLed while its rollouts' harnesses run in their sandboxes, one of
// them a multi-container task's beside its PostgreSQL service. The worker
// started again on the same host removes the sandboxes, the service and
// the network it left, the rollouts run again there, and once the run
// ends no container or network of the run remains on the engine.
func TestWorkerKilledLeavesNoSandbox(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	const tasks = 5 // four of one container, one with a service
	root := sandboxTasks(t, tasks-1)
	require.NoError(t, os.CopyFS(filepath.Join(root, "pg-table"), os.DirFS("../internal/harness/container/testdata/compose/pg-table")))
	srv := startServer(t)
	c := dial(t, srv.addr)
	defer c.Close()
	runs, queue := caseDir(t), "faults-kill-sandbox"
	args := []string{"--max-rollouts", "5", "--runtime", "docker", "--work-dir", t.TempDir()}
	doomed := startWorker(t, srv.addr, runs, queue, args...)
	// The harness does each task: /app/done, and the compose task's table
	// in its service (the task's environment gives it PGHOST).
	const fill = `[ -z "$PGHOST" ] || psql -v ON_ERROR_STOP=1 -c "CREATE TABLE items (name text, price integer); INSERT INTO items VALUES ('apple', 3), ('pear', 5), ('plum', 7);"`
	cfg := workflows.RunConfig{
		RunID: "kill-sandbox", Taskset: "harbor:" + root, MaxConcurrent: tasks, Model: "mock",
		Harness: rollout.HarnessConfig{Command: []string{"sh", "-c", "sleep 15; touch /app/done; " + fill}},
		Limits:  workflows.Limits{HeartbeatTimeout: 5 * time.Second},
	}.WithDefaults()
	run := startEval(t, c, queue, cfg)

	ctx := context.Background()
	var before []engine.ContainerSummary
	require.Eventually(t, func() bool {
		list, err := eng.ListContainers(ctx, container.LabelRun+"="+cfg.RunID)
		require.NoError(t, err)
		before = list
		return len(list) == tasks+1 // and the service
	}, 5*time.Minute, 50*time.Millisecond, "every rollout's sandbox, and the service, start on the first worker")
	doomed.kill()
	killed := time.Now()
	startWorker(t, srv.addr, runs, queue, args...)

	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	var res workflows.Result
	require.NoError(t, run.Get(ctx, &res))
	recs := requireExactlyOnce(t, runs, cfg.RunID, tasks)
	for _, r := range recs {
		assert.Equal(t, 1.0, r.Reward, r.Key)
		assert.Greater(t, r.Attempt, 1, "%s ran again after the kill", r.Key)
	}
	for _, b := range before {
		_, err := eng.InspectContainer(ctx, b.ID)
		assert.True(t, engine.IsNotFound(err), "the killed worker's sandbox %s is removed", b.ID)
	}
	left, err := eng.ListContainers(ctx, container.LabelRun+"="+cfg.RunID)
	require.NoError(t, err)
	assert.Empty(t, left)
	nets, err := eng.ListNetworks(ctx, container.LabelRun+"="+cfg.RunID)
	require.NoError(t, err)
	assert.Empty(t, nets, "no network of the run is left")
	figure(t, "worker SIGKILL with %d containers running (a service among them): %d containers and %d networks of the run left once restarted and done, %d/%d rollouts stored once, run ended %s after the kill",
		len(before), len(left), len(nets), len(recs), tasks, time.Since(killed).Round(time.Millisecond))
}

// sandboxTasks is a Harbor taskset of n tasks, each asking for /app/done
// in a sandbox of an image of its own.
func sandboxTasks(t *testing.T, n int) string {
	t.Helper()
	root := t.TempDir()
	for i := range n {
		dir := filepath.Join(root, fmt.Sprintf("sandbox-%c", 'a'+i))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "environment"), 0o755))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "tests"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "environment", "Dockerfile"), []byte("FROM debian:bookworm-slim\nWORKDIR /app\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "instruction.md"), []byte("Leave /app/done.\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "task.toml"), []byte("version = \"1.0\"\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "tests", "test.sh"), []byte("#!/bin/sh\n[ -f /app/done ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"), 0o755))
	}
	return root
}
