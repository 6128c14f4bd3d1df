package workflows

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestWorkflowsReplaySavedHistories replays histories recorded from real runs
// (see e2e.TestCaptureReplayHistories). A failure means a workflow change
// is not replay-safe: guard it with workflow.GetVersion.
func TestWorkflowsReplaySavedHistories(t *testing.T) {
	for _, file := range []string{
		"testdata/eval_segment.json", "testdata/eval_final.json",
		"testdata/train_final.json", "testdata/epoch_final.json", "testdata/pull_final.json",
	} {
		t.Run(file, func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(Eval, workflow.RegisterOptions{Name: EvalName})
			r.RegisterWorkflowWithOptions(Train, workflow.RegisterOptions{Name: TrainName})
			r.RegisterWorkflowWithOptions(Epoch, workflow.RegisterOptions{Name: EpochName})
			r.RegisterWorkflowWithOptions(Pull, workflow.RegisterOptions{Name: PullName})
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)), file))
		})
	}
}
