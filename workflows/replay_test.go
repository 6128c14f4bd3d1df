package workflows

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestEvalReplaysSavedHistories replays histories recorded from real runs
// (see e2e.TestCaptureReplayHistories). A failure means a workflow change
// is not replay-safe: guard it with workflow.GetVersion.
func TestEvalReplaysSavedHistories(t *testing.T) {
	for _, file := range []string{"testdata/eval_segment.json", "testdata/eval_final.json"} {
		t.Run(file, func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(Eval, workflow.RegisterOptions{Name: EvalName})
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)), file))
		})
	}
}
