package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/workflows"
)

// Live is a run's status on Temporal.
type Live struct {
	// Kind is the run's workflow type: workflows.EvalName, TrainName or
	// SweepName.
	Kind   string
	Status enumspb.WorkflowExecutionStatus
	// Train is a training run's progress: its epoch; nil for an eval, or
	// when the run did not answer.
	Train *workflows.TrainProgress
	// Progress is the run's (a training run's current epoch's) progress;
	// nil when it did not answer (ProgressErr: no worker, say).
	Progress    *workflows.Progress
	ProgressErr error
}

// Status reads a run's status from Temporal and queries its progress. A run
// Temporal does not know is ErrNotFound.
func Status(ctx context.Context, c client.Client, runID string) (Live, error) {
	var l Live
	desc, err := c.DescribeWorkflowExecution(ctx, runID, "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return l, fmt.Errorf("run %s: %w", runID, ErrNotFound)
	}
	if err != nil {
		return l, err
	}
	info := desc.GetWorkflowExecutionInfo()
	l.Kind, l.Status = info.GetType().GetName(), info.GetStatus()
	progressID := runID
	if l.Kind == workflows.SweepName {
		in, err := sweepInput(ctx, c, runID, info.GetExecution().GetRunId())
		if err != nil {
			l.ProgressErr = err
			return l, nil
		}
		p := SweepProgress(ctx, c, in)
		l.Progress = &p
		return l, nil
	}
	if l.Kind == workflows.TrainName {
		if tp, err := TrainProgress(ctx, c, runID); err == nil {
			l.Train = &tp
			progressID = workflows.EpochID(runID, tp.Epoch)
		}
	}
	p, err := Progress(ctx, c, progressID)
	if err != nil {
		l.ProgressErr = err
		return l, nil
	}
	l.Progress = &p
	return l, nil
}

// queryTimeout bounds a progress query: a run without a worker does not
// answer.
const queryTimeout = 2 * time.Second

// Progress queries the progress of an evaluation's (or an epoch's) workflow.
func Progress(ctx context.Context, c client.Client, workflowID string) (workflows.Progress, error) {
	var p workflows.Progress
	return p, query(ctx, c, workflowID, &p)
}

// SweepProgress sums the progress of a sweep's cells that answer: the
// sweep's own progress.
func SweepProgress(ctx context.Context, c client.Client, in workflows.SweepInput) workflows.Progress {
	sum := workflows.Progress{RunID: in.Config.RunID}
	var rewards float64
	for _, cell := range in.Cells {
		p, err := Progress(ctx, c, workflows.CellRunID(in.Config.RunID, cell.Name))
		if err != nil {
			continue
		}
		sum.Tasks += p.Tasks
		sum.Rollouts += p.Rollouts
		sum.Done += p.Done
		sum.Failed += p.Failed
		sum.Running += p.Running
		sum.Reused += p.Reused
		rewards += p.MeanReward * float64(p.Done)
		if sum.StartedAt.IsZero() || p.StartedAt.Before(sum.StartedAt) {
			sum.StartedAt = p.StartedAt
		}
	}
	if sum.Done > 0 {
		sum.MeanReward = rewards / float64(sum.Done)
	}
	return sum
}

// TrainProgress queries a training run's progress: its current epoch.
func TrainProgress(ctx context.Context, c client.Client, runID string) (workflows.TrainProgress, error) {
	var tp workflows.TrainProgress
	return tp, query(ctx, c, runID, &tp)
}

func query(ctx context.Context, c client.Client, workflowID string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	v, err := c.QueryWorkflow(ctx, workflowID, "", workflows.QueryProgress)
	if err != nil {
		return err
	}
	return v.Get(out)
}
