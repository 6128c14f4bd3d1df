package e2e

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/pull"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

// TestCaptureReplayHistories records the histories the workflows package
// replays: a segment that continues as new and the final one. Run it after
// changing workflow code on purpose (and keep the old files replaying):
//
//	EVALFLOW_WRITE_HISTORY=$PWD/workflows/testdata/<version> go test ./e2e -run 'CaptureReplay|CaptureTraining'
func TestCaptureReplayHistories(t *testing.T) {
	if os.Getenv("EVALFLOW_WRITE_HISTORY") == "" {
		t.Skip("set EVALFLOW_WRITE_HISTORY to a directory to record replay histories")
	}
	_, c := startServer(t)
	w, err := wiring.NewWorker(c, wiring.Config{
		TaskQueue: "capture", RunsDir: t.TempDir(), MaxRollouts: 4,
		DefaultHarness: agentCommand, Logger: slog.New(slog.DiscardHandler),
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
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: cfg.RunID, TaskQueue: "capture", TypedSearchAttributes: workflows.SearchAttributes(cfg),
	}, wiring.EvalWorkflowName, workflows.EvalInput{Config: cfg})
	require.NoError(t, err)
	var res workflows.Result
	require.NoError(t, c.GetWorkflow(ctx, cfg.RunID, "").Get(ctx, &res))
	require.Equal(t, int64(12), res.Rollouts)
	hs := histories(t, c, cfg.RunID, run.GetRunID())
	require.Len(t, hs, 2)
	writeHistory(t, "eval_segment.json", hs[0])
	writeHistory(t, "eval_final.json", hs[1])
}

// TestCaptureTrainingHistories records histories of the Train, Epoch and
// Pull workflows for replay tests (see TestCaptureReplayHistories).
func TestCaptureTrainingHistories(t *testing.T) {
	if os.Getenv("EVALFLOW_WRITE_HISTORY") == "" {
		t.Skip("set EVALFLOW_WRITE_HISTORY to a directory to record replay histories")
	}
	tc := newTrainCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	in := trainConfig("replay-train", filepath.Join(t.TempDir(), "never"))
	in.Config.Tasks, in.Config.RolloutsPerTask, in.Config.MaxConcurrent = 3, 2, 2
	in.Train.Epochs = 2
	run := tc.start(t, ctx, in)
	var res workflows.TrainResult
	require.NoError(t, run.Get(ctx, &res))
	writeHistory(t, "train_final.json", histories(t, tc.c, in.Config.RunID, run.GetRunID())[0])
	epoch := tc.c.GetWorkflow(ctx, workflows.EpochID(in.Config.RunID, 1), "")
	writeHistory(t, "epoch_final.json", histories(t, tc.c, workflows.EpochID(in.Config.RunID, 1), epoch.GetRunID())[0])

	in.Config.RunID = "replay-pull"
	in.Train.Epochs = 0
	p, err := pull.Start(ctx, tc.c, tc.queue, in.Config, in.Train)
	require.NoError(t, err)
	ref, err := p.Sample(ctx)
	require.NoError(t, err)
	_, err = p.Sample(ctx)
	require.NoError(t, err)
	_, err = p.RunGroup(ctx, ref, 2)
	require.NoError(t, err)
	require.NoError(t, p.Close(ctx))
	pr := tc.c.GetWorkflow(ctx, "replay-pull", "")
	require.NoError(t, pr.Get(ctx, nil))
	writeHistory(t, "pull_final.json", histories(t, tc.c, "replay-pull", pr.GetRunID())[0])
}

// TestCaptureVerifyHistories records histories of an eval of tasks with a
// verifier for the workflows package's replay tests: Verify after Run, and
// a verifier that fails once and is retried with its rollout.
//
//	EVALFLOW_WRITE_HISTORY=$PWD/workflows/testdata/verify-step go test ./e2e -run CaptureVerify
func TestCaptureVerifyHistories(t *testing.T) {
	if os.Getenv("EVALFLOW_WRITE_HISTORY") == "" {
		t.Skip("set EVALFLOW_WRITE_HISTORY to a directory to record replay histories")
	}
	root, marks := t.TempDir(), t.TempDir()
	for _, name := range []string{"ok-1", "ok-2", "ok-3"} {
		writeTask(t, root, name, `echo 1 > "$EVALFLOW_VERIFIER_LOGS/reward.txt"`, 30)
	}
	// The first run of this verifier writes garbage, the next a reward.
	writeTask(t, root, "flaky", `m=`+marks+`/flaky; if [ -e $m ]; then echo 1; else touch $m; echo oops; fi > "$EVALFLOW_VERIFIER_LOGS/reward.txt"`, 30)
	_, c := startServer(t)
	w, err := wiring.NewWorker(c, wiring.Config{
		TaskQueue: "capture", RunsDir: t.TempDir(), WorkDir: t.TempDir(), MaxRollouts: 2,
		DefaultHarness: agentCommand, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	require.NoError(t, w.Start())
	defer w.Stop()
	cfg := workflows.RunConfig{
		RunID: "replay-verify", Taskset: "harbor:" + root, MaxConcurrent: 2, Model: "mock",
		Harness: rollout.HarnessConfig{Command: []string{"true"}},
		Limits:  workflows.Limits{ContinueAsNewAfter: 3, MaxAttempts: 3},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: cfg.RunID, TaskQueue: "capture"}, wiring.EvalWorkflowName, workflows.EvalInput{Config: cfg})
	require.NoError(t, err)
	var res workflows.Result
	require.NoError(t, c.GetWorkflow(ctx, cfg.RunID, "").Get(ctx, &res))
	require.Equal(t, int64(4), res.OK, "%+v", res.FailedSamples)
	hs := histories(t, c, cfg.RunID, run.GetRunID())
	require.Len(t, hs, 2)
	writeHistory(t, "eval_segment.json", hs[0])
	writeHistory(t, "eval_final.json", hs[1])
}

// TestCapturePolicyHistories records a pull run's history with policy
// versions: announced versions, a group generated on the first, and the
// same group asked for again two versions later with a bound of one, so
// its rollouts are run again under rerun keys.
//
//	EVALFLOW_WRITE_HISTORY=$PWD/workflows/testdata/policy-versions go test ./e2e -run CapturePolicy
func TestCapturePolicyHistories(t *testing.T) {
	if os.Getenv("EVALFLOW_WRITE_HISTORY") == "" {
		t.Skip("set EVALFLOW_WRITE_HISTORY to a directory to record replay histories")
	}
	tc := newTrainCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	in := trainConfig("replay-policy", filepath.Join(t.TempDir(), "never"))
	in.Config.Tasks, in.Config.MaxConcurrent = 3, 2
	in.Config.Harness = rollout.HarnessConfig{} // the built-in agent: its turns record versions
	in.Train.Epochs = 0
	p, err := pull.Start(ctx, tc.c, tc.queue, in.Config, in.Train)
	require.NoError(t, err)
	_, err = p.SetPolicyVersion(ctx, 0)
	require.NoError(t, err)
	ref, err := p.Sample(ctx)
	require.NoError(t, err)
	_, err = p.RunGroup(ctx, ref, 2)
	require.NoError(t, err)
	_, err = p.SetPolicyVersion(ctx, 2)
	require.NoError(t, err)
	g, err := p.RunGroup(ctx, ref, 2, pull.MaxOffPolicySteps(1), pull.OnStale(workflows.OnStaleRerun))
	require.NoError(t, err)
	for _, s := range g.Rollouts {
		require.Equal(t, 1, s.StaleReruns, "%+v", s)
	}
	require.NoError(t, p.Close(ctx))
	pr := tc.c.GetWorkflow(ctx, "replay-policy", "")
	require.NoError(t, pr.Get(ctx, nil))
	writeHistory(t, "pull_final.json", histories(t, tc.c, "replay-policy", pr.GetRunID())[0])
}

// TestCaptureRunCostHistories records an eval stopped at its run cost
// bound, for the replay test:
//
//	EVALFLOW_WRITE_HISTORY=$PWD/workflows/testdata/run-cost go test ./e2e -run CaptureRunCost
func TestCaptureRunCostHistories(t *testing.T) {
	if os.Getenv("EVALFLOW_WRITE_HISTORY") == "" {
		t.Skip("set EVALFLOW_WRITE_HISTORY to a directory to record replay histories")
	}
	_, c := startServer(t)
	w, err := wiring.NewWorker(c, wiring.Config{
		TaskQueue: "capture", RunsDir: t.TempDir(), MaxRollouts: 2,
		DefaultHarness: agentCommand, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	require.NoError(t, w.Start())
	defer w.Stop()
	cfg := workflows.RunConfig{RunID: "replay-run-cost", Taskset: "sample", Tasks: 6, MaxConcurrent: 2, Model: "mock", MaxRunCostUSD: 1e-9}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: cfg.RunID, TaskQueue: "capture"}, wiring.EvalWorkflowName, workflows.EvalInput{Config: cfg})
	require.NoError(t, err)
	var res workflows.Result
	require.NoError(t, run.Get(ctx, &res))
	require.Equal(t, workflows.StoppedMaxRunCost, res.Stopped)
	writeHistory(t, "eval_final.json", histories(t, c, cfg.RunID, run.GetRunID())[0])
}
