package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/devserver/devtest"
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
	t.Parallel()
	skipUnlessCapturing(t)
	cfg := workflows.RunConfig{
		RunID: "replay-run", Taskset: "sample", Tasks: 6, RolloutsPerTask: 2, MaxConcurrent: 3,
		Shuffle: true, Seed: 11, Model: "mock",
		Limits: workflows.Limits{ContinueAsNewAfter: 8},
	}
	res, hs := captureEval(t, wiring.Config{MaxRollouts: 4}, cfg,
		client.StartWorkflowOptions{TypedSearchAttributes: workflows.SearchAttributes(cfg)})
	require.Equal(t, int64(12), res.Rollouts)
	writeSegmentAndFinal(t, hs)
}

// TestCaptureTrainingHistories records histories of the Train, Epoch and
// Pull workflows for replay tests (see TestCaptureReplayHistories).
func TestCaptureTrainingHistories(t *testing.T) {
	t.Parallel()
	skipUnlessCapturing(t)
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
	writeClosedPull(t, ctx, tc, p, "replay-pull")
}

// TestCaptureVerifyHistories records histories of an eval of tasks with a
// verifier for the workflows package's replay tests: Verify after Run, and
// a verifier that fails once and is retried with its rollout.
//
//	EVALFLOW_WRITE_HISTORY=$PWD/workflows/testdata/verify-step go test ./e2e -run CaptureVerify
func TestCaptureVerifyHistories(t *testing.T) {
	t.Parallel()
	skipUnlessCapturing(t)
	root, marks := t.TempDir(), t.TempDir()
	for _, name := range []string{"ok-1", "ok-2", "ok-3"} {
		writeTask(t, root, name, `echo 1 > "$EVALFLOW_VERIFIER_LOGS/reward.txt"`, 30)
	}
	// The first run of this verifier writes garbage, the next a reward.
	writeTask(t, root, "flaky", `m=`+marks+`/flaky; if [ -e $m ]; then echo 1; else touch $m; echo oops; fi > "$EVALFLOW_VERIFIER_LOGS/reward.txt"`, 30)
	cfg := workflows.RunConfig{
		RunID: "replay-verify", Taskset: "harbor:" + root, MaxConcurrent: 2, Model: "mock",
		Harness: rollout.HarnessConfig{Command: []string{"true"}},
		Limits:  workflows.Limits{ContinueAsNewAfter: 3, MaxAttempts: 3},
	}
	res, hs := captureEval(t, wiring.Config{WorkDir: t.TempDir(), MaxRollouts: 2}, cfg, client.StartWorkflowOptions{})
	require.Equal(t, int64(4), res.OK, "%+v", res.FailedSamples)
	writeSegmentAndFinal(t, hs)
}

// TestCapturePolicyHistories records a pull run's history with policy
// versions: announced versions, a group generated on the first, and the
// same group asked for again two versions later with a bound of one, so
// its rollouts are run again under rerun keys.
//
//	EVALFLOW_WRITE_HISTORY=$PWD/workflows/testdata/policy-versions go test ./e2e -run CapturePolicy
func TestCapturePolicyHistories(t *testing.T) {
	t.Parallel()
	skipUnlessCapturing(t)
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
	writeClosedPull(t, ctx, tc, p, "replay-policy")
}

// writeClosedPull closes the pull run p of runID and, once it ended,
// writes its history as pull_final.json.
func writeClosedPull(t *testing.T, ctx context.Context, tc *trainCluster, p *pull.Client, runID string) {
	t.Helper()
	require.NoError(t, p.Close(ctx))
	pr := tc.c.GetWorkflow(ctx, runID, "")
	require.NoError(t, pr.Get(ctx, nil))
	writeHistory(t, "pull_final.json", histories(t, tc.c, runID, pr.GetRunID())[0])
}

// TestCaptureRunCostHistories records an eval stopped at its run cost
// bound, for the replay test:
//
//	EVALFLOW_WRITE_HISTORY=$PWD/workflows/testdata/run-cost go test ./e2e -run CaptureRunCost
func TestCaptureRunCostHistories(t *testing.T) {
	t.Parallel()
	skipUnlessCapturing(t)
	cfg := workflows.RunConfig{RunID: "replay-run-cost", Taskset: "sample", Tasks: 6, MaxConcurrent: 2, Model: "mock", MaxRunCostUSD: 1e-9}
	res, hs := captureEval(t, wiring.Config{MaxRollouts: 2}, cfg, client.StartWorkflowOptions{})
	require.Equal(t, workflows.StoppedMaxRunCost, res.Stopped)
	writeHistory(t, "eval_final.json", hs[0])
}

// writeSegmentAndFinal writes an eval's two histories: a segment that
// continued as new, and the final one.
func writeSegmentAndFinal(t *testing.T, hs []string) {
	t.Helper()
	require.Len(t, hs, 2)
	writeHistory(t, "eval_segment.json", hs[0])
	writeHistory(t, "eval_final.json", hs[1])
}

// skipUnlessCapturing skips a test that records histories for the
// workflows package's replay tests unless EVALFLOW_WRITE_HISTORY names
// where they go.
func skipUnlessCapturing(t *testing.T) {
	t.Helper()
	if os.Getenv("EVALFLOW_WRITE_HISTORY") == "" {
		t.Skip("set EVALFLOW_WRITE_HISTORY to a directory to record replay histories")
	}
}

// captureEval runs an eval of cfg, started with opts, on a server of its
// own and a worker of worker's settings, on the queue "capture"; it
// returns the eval's result and the histories of its chain.
func captureEval(t *testing.T, worker wiring.Config, cfg workflows.RunConfig, opts client.StartWorkflowOptions) (workflows.Result, []string) {
	t.Helper()
	_, c := devtest.StartEvalflow(t)
	worker.TaskQueue, worker.RunsDir, worker.DefaultHarness = "capture", t.TempDir(), agentCommand
	startWorker(t, c, worker)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts.ID, opts.TaskQueue = cfg.RunID, "capture"
	run, err := c.ExecuteWorkflow(ctx, opts, wiring.EvalWorkflowName, workflows.EvalInput{Config: cfg})
	require.NoError(t, err)
	var res workflows.Result
	require.NoError(t, c.GetWorkflow(ctx, cfg.RunID, "").Get(ctx, &res))
	return res, histories(t, c, cfg.RunID, run.GetRunID())
}
