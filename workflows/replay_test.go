package workflows

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/evalflow/evalflow/rollout"
)

// TestWorkflowsReplaySavedHistories replays histories recorded from real runs
// (see e2e.TestCaptureReplayHistories). A failure means a workflow change
// is not replay-safe: guard it with workflow.GetVersion.
//
// Each folder of testdata holds the histories of one version of the
// workflows (recorded with EVALFLOW_WRITE_HISTORY=$PWD/workflows/testdata/<name>):
// every one of them must keep replaying.
func TestWorkflowsReplaySavedHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/*/*.json")
	require.NoError(t, err)
	for _, want := range []string{"before-held-slots", "held-slots", "ui-metadata"} {
		n := 0
		for _, f := range files {
			if filepath.Base(filepath.Dir(f)) == want {
				n++
			}
		}
		require.Equal(t, 5, n, "testdata/%s holds the eval, train, epoch and pull histories", want)
	}
	// verify-step: an eval of tasks with a verifier, Verify after Run and a
	// verifier's retry (e2e.TestCaptureVerifyHistories).
	for _, name := range []string{"eval_segment.json", "eval_final.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "verify-step", name))
		require.NoError(t, err)
		require.Contains(t, string(b), `"name":"`+rollout.ActivityVerify+`"`, "testdata/verify-step/%s schedules Verify", name)
	}
	// policy-versions: a pull run whose trainer announced versions, and a
	// group asked for again past its bound, rerun under rerun keys
	// (e2e.TestCapturePolicyHistories).
	b, err := os.ReadFile(filepath.Join("testdata", "policy-versions", "pull_final.json"))
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(b), `"name":"`+UpdatePolicy+`"`), "testdata/policy-versions announces two versions")
	require.Equal(t, 4, strings.Count(string(b), `"name":"`+rollout.ActivityRun+`"`), "testdata/policy-versions runs a group of 2, then reruns it")
	// run-cost: an eval stopped at its --max-run-cost after the window's
	// two rollouts of six (e2e.TestCaptureRunCostHistories).
	b, err = os.ReadFile(filepath.Join("testdata", "run-cost", "eval_final.json"))
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(b), `"name":"`+rollout.ActivityRun+`"`), "testdata/run-cost runs two rollouts of six")
	// sweep: a 2 × 2 sweep's parent starting its four cells, with the
	// harness attribute, and one cell's eval (e2e.TestCaptureSweepHistories).
	b, err = os.ReadFile(filepath.Join("testdata", "sweep", "sweep_final.json"))
	require.NoError(t, err)
	require.Equal(t, 4, strings.Count(string(b), "EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED"), "testdata/sweep starts four cells")
	require.Contains(t, string(b), AttrHarness, "testdata/sweep's cells carry their harness")
	require.FileExists(t, filepath.Join("testdata", "sweep", "cell_final.json"))
	// ui-metadata: activities carry summaries, the eval and epoch upsert
	// their figures into the memo, the epoch inherits the run's attributes.
	for name, want := range map[string][]string{
		"eval_final.json":  {`"userMetadata"`, "WORKFLOW_PROPERTIES_MODIFIED"},
		"epoch_final.json": {`"userMetadata"`, "WORKFLOW_PROPERTIES_MODIFIED"},
		"train_final.json": {AttrRunID},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", "ui-metadata", name))
		require.NoError(t, err)
		for _, w := range want {
			require.Contains(t, string(b), w, "testdata/ui-metadata/%s", name)
		}
	}
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(Eval, workflow.RegisterOptions{Name: EvalName})
			r.RegisterWorkflowWithOptions(Train, workflow.RegisterOptions{Name: TrainName})
			r.RegisterWorkflowWithOptions(Epoch, workflow.RegisterOptions{Name: EpochName})
			r.RegisterWorkflowWithOptions(Pull, workflow.RegisterOptions{Name: PullName})
			r.RegisterWorkflowWithOptions(Sweep, workflow.RegisterOptions{Name: SweepName})
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)), file))
		})
	}
}
