package faults

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/engine/enginetest"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

// TestBrokenTaskImageDoesNotEndTheRun: of a run's two tasks in the
// container runtime, one's Dockerfile does not build. The run ends with
// the other scored; the broken task's rollout is recorded as a config
// failure whose error carries the failing command's message and whose
// trace keeps the build's output, and the mean is the scored task's alone.
func TestBrokenTaskImageDoesNotEndTheRun(t *testing.T) {
	t.Parallel()
	enginetest.Client(t)
	root := t.TempDir()
	for name, dockerfile := range map[string]string{
		"builds": "FROM debian:bookworm-slim\nWORKDIR /app\n",
		"broken": "FROM debian:bookworm-slim\nWORKDIR /app\nRUN echo no-such-package-xyz >&2 && exit 100\n",
	} {
		dir := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "environment"), 0o755))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "tests"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "environment", "Dockerfile"), []byte(dockerfile), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "instruction.md"), []byte("Leave /app/done.\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "task.toml"), []byte("version = \"1.0\"\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "tests", "test.sh"), []byte("#!/bin/sh\n[ -f /app/done ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"), 0o755))
	}
	srv := startServer(t)
	c := dial(t, srv.addr)
	defer c.Close()
	runs, queue := caseDir(t), "faults-broken-image"
	startWorker(t, srv.addr, runs, queue, "--max-rollouts", "2", "--runtime", "docker", "--work-dir", t.TempDir())
	cfg := workflows.RunConfig{
		RunID: "broken-image", Taskset: "harbor:" + root, MaxConcurrent: 2, Model: "mock",
		Harness: rollout.HarnessConfig{Command: []string{"sh", "-c", "touch /app/done"}},
	}.WithDefaults()
	run := startEval(t, c, queue, cfg)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var res workflows.Result
	require.NoError(t, run.Get(ctx, &res), "the run ends, not failed by the broken task")
	assert.Equal(t, int64(2), res.Rollouts)
	assert.Equal(t, int64(1), res.OK)
	assert.Equal(t, int64(1), res.Refused)
	assert.Equal(t, []workflows.KindCount{{Kind: rollout.KindConfig, Count: 1}}, res.Errors)
	assert.Equal(t, 1.0, res.MeanReward, "the broken task is not scored 0 into the mean")

	store, err := results.Open(runs)
	require.NoError(t, err)
	recs, err := store.List(ctx, cfg.RunID)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	for _, r := range recs {
		if r.TaskID == "builds" {
			assert.Equal(t, rollout.StatusOK, r.Status, r.Error)
			assert.Equal(t, 1.0, r.Reward)
			continue
		}
		assert.Equal(t, rollout.KindConfig, r.ErrorKind)
		assert.Contains(t, r.Error, "task broken: the image of")
		assert.Contains(t, r.Error, "no-such-package-xyz", "the failing command's own message")
		tr, err := store.Trace(ctx, cfg.RunID, r.Key)
		require.NoError(t, err)
		var log string
		for _, l := range tr.Harness.SessionLogs {
			if l.Name == "image-build.log" {
				log = l.Content
			}
		}
		assert.Contains(t, log, "no-such-package-xyz", "the trace keeps the build's output")
	}
}
