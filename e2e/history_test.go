package e2e

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/wiring"
	"github.com/evalflow/evalflow/workflows"
)

// TestCaptureReplayHistories records the histories the workflows package
// replays: a segment that continues as new and the final one. Run it after
// changing workflow code on purpose (and keep the old files replaying):
//
//	EVALFLOW_WRITE_HISTORY=$PWD/workflows/testdata go test ./e2e -run CaptureReplay
func TestCaptureReplayHistories(t *testing.T) {
	if os.Getenv("EVALFLOW_WRITE_HISTORY") == "" {
		t.Skip("set EVALFLOW_WRITE_HISTORY to a directory to record replay histories")
	}
	_, c := startServer(t)
	w, err := wiring.NewWorker(c, wiring.Config{
		TaskQueue: "capture", RunsDir: t.TempDir(), MaxRollouts: 4,
		DefaultHarness: []string{os.Args[0], "agent"}, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	require.NoError(t, w.Start())
	defer w.Stop()
	cfg := workflows.RunConfig{
		RunID: "replay-run", Taskset: "sample", Tasks: 6, RolloutsPerTask: 2, MaxConcurrent: 3,
		Shuffle: true, Seed: 11, Model: "mock",
		Limits: workflows.Limits{ContinueAsNewAfter: 8},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: cfg.RunID, TaskQueue: "capture"}, wiring.EvalWorkflowName, workflows.EvalInput{Config: cfg})
	require.NoError(t, err)
	var res workflows.Result
	require.NoError(t, c.GetWorkflow(ctx, cfg.RunID, "").Get(ctx, &res))
	require.Equal(t, int64(12), res.Rollouts)
	hs := histories(t, c, cfg.RunID, run.GetRunID())
	require.Len(t, hs, 2)
	writeHistory(t, "eval_segment.json", hs[0])
	writeHistory(t, "eval_final.json", hs[1])
}
