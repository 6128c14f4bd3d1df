package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"
)

// Memo keys under which eval and epoch workflows keep their live figures,
// readable in the Temporal UI without a query.
const (
	// MemoFigures holds a Figures.
	MemoFigures = "figures"
	// MemoSummary holds the figures as one line of text.
	MemoSummary = "summary"
)

// memoEvery is how many finished rollouts pass between two memo upserts:
// each upsert is a history event, so the memo is refreshed in steps while
// the current details (not recorded in history) follow every rollout.
const memoEvery = 25

// Figures are a run's live figures as its memo shows them.
type Figures struct {
	Rollouts   int64       `json:"rollouts"`
	Done       int64       `json:"done"`
	Failed     int64       `json:"failed"`
	Errors     []KindCount `json:"errors,omitempty"`
	Running    int         `json:"running"`
	MeanReward float64     `json:"mean_reward"`
	// Refused counts the done rollouts of tasks refused as configured,
	// which MeanReward leaves out.
	Refused int64 `json:"refused,omitempty"`
	// Finished is set once every rollout of the run (or epoch) has ended.
	Finished bool `json:"finished"`
}

func figures(agg Aggregates, rollouts int64, running int, finished bool) Figures {
	return Figures{
		Rollouts: rollouts, Done: agg.Rollouts, Failed: agg.Failed, Errors: agg.Errors,
		Running: running, MeanReward: agg.Mean(), Refused: agg.Refused, Finished: finished,
	}
}

// String is the figures in one line: a run whose rollouts failed says so,
// and one that scored none has no mean.
func (f Figures) String() string {
	s := fmt.Sprintf("%d/%d rollouts done", f.Done, f.Rollouts)
	if f.Finished {
		s = fmt.Sprintf("finished: %d rollouts", f.Done)
	}
	if f.Failed > 0 {
		s += fmt.Sprintf(", %d failed (%s)", f.Failed, errorKinds(f.Errors))
	} else {
		s += ", none failed"
	}
	if !f.Finished {
		s += fmt.Sprintf(", %d running", f.Running)
	}
	if f.Done-f.Refused <= 0 {
		return s + ", no rollout scored"
	}
	return s + fmt.Sprintf(", mean reward %.3f", f.MeanReward)
}

// showFigures puts the figures in the workflow's current details (every
// call) and, for workflows past uiMetadata, its memo: every memoEvery
// finished rollouts and once finished.
func showFigures(ctx workflow.Context, w *window, f Figures) {
	workflow.SetCurrentDetails(ctx, f.String())
	if !w.labels || (!f.Finished && (f.Done == 0 || f.Done%memoEvery != 0)) {
		return
	}
	if err := workflow.UpsertMemo(ctx, map[string]any{MemoFigures: f, MemoSummary: f.String()}); err != nil {
		workflow.GetLogger(ctx).Warn("could not update the memo", "error", err)
	}
}
