package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/evalflow/evalflow/rollout"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// TrainName is the registered name of the Train workflow.
const TrainName = "TrainWorkflow"

// TrainInput starts, resumes or continues a training run.
type TrainInput struct {
	Config RunConfig   `json:"config"`
	Train  TrainConfig `json:"train"`
	State  *TrainState `json:"state,omitempty"`
}

// TrainState is what a training run carries through continue-as-new.
type TrainState struct {
	TasksetLen int64 `json:"taskset_len"`
	// Tasks is the number of tasks per epoch.
	Tasks int64 `json:"tasks"`
	// Epoch is the next epoch to run.
	Epoch int `json:"epoch"`
	// Finished lists the epochs the run store held as finished when the run
	// started: a resumed run skips them.
	Finished []int `json:"finished,omitempty"`
	// Recent keeps the last epochs' results.
	Recent    []EpochResult `json:"recent,omitempty"`
	Totals    Aggregates    `json:"totals"`
	Ran       int64         `json:"ran"`
	StartedAt time.Time     `json:"started_at"`
	Segment   int           `json:"segment"`
}

// TrainProgress is what a training run's progress query returns; the
// current epoch's own progress is queried on its workflow.
type TrainProgress struct {
	RunID string `json:"run_id"`
	// Epoch is the epoch running now; its workflow id is EpochID(RunID, Epoch).
	Epoch    int   `json:"epoch"`
	Epochs   int   `json:"epochs"`
	Skipped  []int `json:"skipped,omitempty"`
	Rollouts int64 `json:"rollouts"`
}

// TrainResult is a finished training run's summary.
type TrainResult struct {
	RunID string `json:"run_id"`
	// Epochs holds the results of the epochs this execution ran (the last
	// ones, when there were many).
	Epochs   []EpochResult `json:"epochs"`
	Skipped  []int         `json:"skipped,omitempty"`
	Rollouts int64         `json:"rollouts"`
	Reused   int64         `json:"reused"`
	// Rerun counts the stored failures that ran again.
	Rerun      int64   `json:"rerun,omitempty"`
	Ran        int64   `json:"ran"`
	Failed     int64   `json:"failed"`
	MeanReward float64 `json:"mean_reward"`
	WallTime   string  `json:"wall_time"`
	// CostUSD is what the run's epochs cost; UnpricedRollouts counts their
	// rollouts with a call of a model without a price (Result's).
	CostUSD          float64 `json:"cost_usd,omitempty"`
	UnpricedRollouts int64   `json:"unpriced_rollouts,omitempty"`
}

// epochRestart is the change that makes a resumed run wait for an epoch
// of the run it replaces to end, instead of failing to start it.
const epochRestart = "epoch-restart"

// epochRestartWait and epochRestartTries bound that wait.
const (
	epochRestartWait  = 2 * time.Second
	epochRestartTries = 60
)

// runEpoch runs one epoch as a child workflow under its own id. A run that
// was terminated and resumed at once may find its old epoch still running:
// the server terminates children of a closed parent shortly after, so the
// start is tried again until that epoch has ended.
func runEpoch(ctx workflow.Context, cfg RunConfig, train TrainConfig, st *TrainState) (EpochResult, error) {
	opts := workflow.ChildWorkflowOptions{
		WorkflowID: EpochID(cfg.RunID, st.Epoch),
		// A resumed run starts a failed epoch again under its own id.
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}
	if workflow.GetVersion(ctx, uiMetadata, workflow.DefaultVersion, 1) >= 1 {
		// One filter on the run id finds the epochs too.
		opts.TypedSearchAttributes = runAttributes(workflow.GetTypedSearchAttributes(ctx))
	}
	childCtx := workflow.WithChildOptions(ctx, opts)
	in := EpochInput{Config: cfg, Train: train, Epoch: st.Epoch, TasksetLen: st.TasksetLen, Tasks: st.Tasks}
	for try := 1; ; try++ {
		var r EpochResult
		err := workflow.ExecuteChildWorkflow(childCtx, EpochName, in).Get(ctx, &r)
		var started *temporal.ChildWorkflowExecutionAlreadyStartedError
		if !errors.As(err, &started) || try == epochRestartTries ||
			workflow.GetVersion(ctx, epochRestart, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			return r, err
		}
		workflow.GetLogger(ctx).Info("an epoch of the replaced run is still ending; waiting to start it again", "epoch", st.Epoch)
		if err := workflow.Sleep(ctx, epochRestartWait); err != nil {
			return r, err
		}
	}
}

// EpochID is the workflow id of a run's epoch.
func EpochID(runID string, epoch int) string { return fmt.Sprintf("%s/epoch-%d", runID, epoch) }

// keepRecent bounds TrainState.Recent.
const keepRecent = 32

// epochsPerSegment bounds a training run's history: it continues as new
// after this many epochs.
const epochsPerSegment = 20

// Train loops epochs over the taskset, each a child Epoch workflow with a
// fresh permutation from (seed, epoch). Epochs the run store already holds
// are skipped, so a failed or killed run resumes where it stopped.
func Train(ctx workflow.Context, in TrainInput) (TrainResult, error) {
	cfg := in.Config.WithDefaults()
	st := in.State
	if st == nil {
		var err error
		if st, err = startTrain(ctx, cfg, in.Train); err != nil {
			return TrainResult{}, err
		}
	}
	skipped := []int{}
	err := workflow.SetQueryHandler(ctx, QueryProgress, func() (TrainProgress, error) {
		return TrainProgress{RunID: cfg.RunID, Epoch: st.Epoch, Epochs: in.Train.Epochs, Skipped: skipped, Rollouts: st.Totals.Rollouts}, nil
	})
	if err != nil {
		return TrainResult{}, err
	}
	ran := 0
	for ; in.Train.Epochs == 0 || st.Epoch < in.Train.Epochs; st.Epoch++ {
		if slices.Contains(st.Finished, st.Epoch) {
			skipped = append(skipped, st.Epoch)
			continue
		}
		if ran == epochsPerSegment || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			st.Segment++
			return TrainResult{}, workflow.NewContinueAsNewError(ctx, Train, TrainInput{Config: cfg, Train: in.Train, State: st})
		}
		r, err := runEpoch(ctx, cfg, in.Train, st)
		if err != nil {
			return TrainResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("epoch %d failed; fix the cause and run `starter resume %s`", st.Epoch, cfg.RunID), ErrEpochFailed, err)
		}
		ran++
		st.Recent = append(st.Recent, r)
		if len(st.Recent) > keepRecent {
			st.Recent = st.Recent[len(st.Recent)-keepRecent:]
		}
		st.Totals.Rollouts += r.Run.Rollouts
		st.Totals.Reused += r.Run.Reused
		st.Totals.Rerun += r.Run.Rerun
		st.Totals.Failed += r.Run.Failed
		st.Totals.RewardSum += r.Run.MeanReward * float64(r.Run.Rollouts)
		st.Totals.CostUSD += r.Run.CostUSD
		st.Totals.UnpricedRollouts += r.Run.UnpricedRollouts
		st.Ran += r.Ran
	}

	res := TrainResult{
		RunID: cfg.RunID, Epochs: st.Recent, Skipped: skipped,
		Rollouts: st.Totals.Rollouts, Reused: st.Totals.Reused, Rerun: st.Totals.Rerun, Ran: st.Ran, Failed: st.Totals.Failed,
		MeanReward: st.Totals.Mean(), WallTime: workflow.Now(ctx).Sub(st.StartedAt).Round(time.Millisecond).String(),
		CostUSD: st.Totals.CostUSD, UnpricedRollouts: st.Totals.UnpricedRollouts,
	}
	finishCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	if err := workflow.ExecuteActivity(finishCtx, rollout.ActivityFinish, rollout.FinishInput{RunID: cfg.RunID, Summary: res}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("could not write the run summary", "error", err)
	}
	return res, nil
}

func startTrain(ctx workflow.Context, cfg RunConfig, train TrainConfig) (*TrainState, error) {
	if err := cfg.Validate(); err != nil {
		return nil, configError(err)
	}
	if err := train.Validate(); err != nil {
		return nil, configError(err)
	}
	actCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5, NonRetryableErrorTypes: []string{rollout.ErrTypeConfig}},
	})
	var desc rollout.DescribeTasksetResult
	if err := workflow.ExecuteActivity(actCtx, rollout.ActivityDescribeTaskset, rollout.DescribeTasksetInput{Taskset: cfg.Taskset}).Get(ctx, &desc); err != nil {
		return nil, err
	}
	tasks, err := tasksPerEpoch(cfg, desc.Len)
	if err != nil {
		return nil, configError(err)
	}
	if desc.Len < 0 && cfg.Shuffle {
		workflow.GetLogger(ctx).Warn("shuffle ignored: the taskset is infinite", "taskset", cfg.Taskset)
	}
	var inv rollout.InventoryResult
	if err := workflow.ExecuteActivity(actCtx, rollout.ActivityInventory, rollout.InventoryInput{RunID: cfg.RunID}).Get(ctx, &inv); err != nil {
		return nil, err
	}
	return &TrainState{TasksetLen: desc.Len, Tasks: tasks, Finished: inv.Epochs, StartedAt: workflow.Now(ctx)}, nil
}

// tasksPerEpoch is how many tasks each epoch takes from a taskset of n tasks
// (-1: infinite).
func tasksPerEpoch(cfg RunConfig, n int64) (int64, error) {
	switch {
	case n < 0 && cfg.Tasks == 0:
		return 0, fmt.Errorf("taskset %q is infinite: give --tasks (tasks per epoch)", cfg.Taskset)
	case n < 0:
		return cfg.Tasks, nil
	case cfg.Tasks == 0:
		return n, nil
	case cfg.Tasks > n:
		return 0, fmt.Errorf("--tasks %d exceeds the %d tasks of %q", cfg.Tasks, n, cfg.Taskset)
	}
	return cfg.Tasks, nil
}
