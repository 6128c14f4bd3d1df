package workflows

import (
	"fmt"
	"time"

	"github.com/evalflow/evalflow/rollout"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// EvalInput starts or continues an EvalWorkflow. State is nil on the first
// run and carries the cursor and aggregates through continue-as-new.
type EvalInput struct {
	Config RunConfig  `json:"config"`
	State  *EvalState `json:"state,omitempty"`
}

// EvalState is what an eval carries from one workflow run to the next.
type EvalState struct {
	// Tasks is how many task positions the run covers.
	Tasks int64 `json:"tasks"`
	// TasksetLen is the taskset's size, -1 when infinite.
	TasksetLen int64 `json:"taskset_len"`
	// Next is the next rollout unit to start; unit u is task position
	// u / RolloutsPerTask, sample u % RolloutsPerTask.
	Next      int64       `json:"next"`
	Agg       Aggregates  `json:"agg"`
	Partial   []TaskTally `json:"partial,omitempty"`
	StartedAt time.Time   `json:"started_at"`
	Segment   int         `json:"segment"`
	// Stopped is why the run stopped starting rollouts (StoppedMaxRunCost).
	Stopped string `json:"stopped,omitempty"`
}

// runCost is the change that bounds an eval's cost (RunConfig.MaxRunCostUSD).
const runCost = "run-cost"

// StoppedMaxRunCost is Result.Stopped of an eval whose stored rollouts cost
// its RunConfig.MaxRunCostUSD: it started no more.
const StoppedMaxRunCost = "max_run_cost"

// Eval runs every rollout of an evaluation through a sliding window of at
// most MaxConcurrent in flight, continuing as new every ContinueAsNewAfter
// rollouts so that a run of any length keeps a small history.
func Eval(ctx workflow.Context, in EvalInput) (Result, error) {
	cfg := in.Config.WithDefaults()
	log := workflow.GetLogger(ctx)
	st := in.State
	if st == nil {
		var err error
		if st, err = startEval(ctx, cfg); err != nil {
			return Result{}, err
		}
	}
	k := int64(cfg.RolloutsPerTask)
	units := st.Tasks * k
	win := newWindow(ctx, cfg.MaxConcurrent, cfg.Limits)
	err := workflow.SetQueryHandler(ctx, QueryProgress, func() (Progress, error) {
		return Progress{
			RunID: cfg.RunID, Tasks: st.Tasks, Rollouts: units,
			Done: st.Agg.Rollouts, Failed: st.Agg.Failed, Running: win.running, Reused: st.Agg.Reused,
			MeanReward: st.Agg.Mean(), StartedAt: st.StartedAt, Segment: st.Segment,
		}, nil
	})
	if err != nil {
		return Result{}, err
	}

	cursor := NewCursor(st.TasksetLen, cfg.Seed, cfg.Shuffle)
	costBound := cfg.MaxRunCostUSD > 0 &&
		workflow.GetVersion(ctx, runCost, workflow.DefaultVersion, 1) >= 1
	started := 0
	next := func() (pending, bool) {
		if st.Next >= units || started >= cfg.Limits.ContinueAsNewAfter {
			return pending{}, false
		}
		if costBound && st.Agg.CostUSD >= cfg.MaxRunCostUSD {
			if st.Stopped == "" {
				st.Stopped = StoppedMaxRunCost
				log.Info("run cost bound reached: no more rollouts start", "cost_usd", st.Agg.CostUSD, "max_run_cost_usd", cfg.MaxRunCostUSD)
			}
			return pending{}, false
		}
		u := st.Next
		st.Next++
		started++
		position := u / k
		epoch, index := cursor.At(position)
		return pending{position: position, ref: rollout.Ref{
			RunID: cfg.RunID, Epoch: epoch, Index: index, K: int(u % k),
			Taskset: cfg.Taskset, Model: cfg.Model, Sampling: cfg.Sampling,
			Harness: cfg.Harness, Rubric: cfg.Rubric, RetryFailed: cfg.RetryFailed,
		}}, true
	}
	fatal := win.drive(ctx, next, func(position int64, s rollout.Summary) {
		st.record(position, s, cfg.RolloutsPerTask, cfg.Limits.PassThreshold)
		showFigures(ctx, win, figures(st.Agg, units, win.running, false))
	})
	if fatal != nil {
		return Result{}, fatal
	}
	done := st.Next >= units || st.Stopped != ""
	if done {
		showFigures(ctx, win, figures(st.Agg, units, 0, true))
	}
	if !done {
		st.Segment++
		return Result{}, workflow.NewContinueAsNewError(ctx, Eval, EvalInput{Config: cfg, State: st})
	}

	res := st.Agg.result(cfg, st.Tasks, st.StartedAt, workflow.Now(ctx), st.Segment+1)
	res.Stopped = st.Stopped
	finishCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	if err := workflow.ExecuteActivity(finishCtx, rollout.ActivityFinish, rollout.FinishInput{RunID: cfg.RunID, Summary: res}).Get(ctx, nil); err != nil {
		log.Warn("could not write the run summary", "error", err)
	}
	// A run past its failure limit ends failed, its result in the error's
	// details: the Temporal UI shows it failed, not a clean success. Runs
	// without a limit (every run recorded before it existed) end as before.
	if cfg.MaxFailures > 0 {
		if limit := (TrainConfig{MaxFailures: cfg.MaxFailures}).failureLimit(units); res.Failed > limit {
			return Result{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"%d of %d rollouts failed, more than --max-failures %v allows (%s)",
				res.Failed, units, cfg.MaxFailures, errorKinds(res.Errors)), ErrRunFailed, nil, res)
		}
	}
	return res, nil
}

// ErrRunFailed is the error type of an eval that failed more rollouts than
// its MaxFailures allows; the error's details hold its Result.
const ErrRunFailed = "RunFailed"

func startEval(ctx workflow.Context, cfg RunConfig) (*EvalState, error) {
	if err := cfg.Validate(); err != nil {
		return nil, configError(err)
	}
	descCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5, NonRetryableErrorTypes: []string{rollout.ErrTypeConfig}},
	})
	var desc rollout.DescribeTasksetResult
	if err := workflow.ExecuteActivity(descCtx, rollout.ActivityDescribeTaskset, rollout.DescribeTasksetInput{Taskset: cfg.Taskset}).Get(ctx, &desc); err != nil {
		return nil, err
	}
	tasks := cfg.Tasks
	switch {
	case desc.Len < 0 && tasks == 0:
		return nil, configError(fmt.Errorf("taskset %q is infinite: give --tasks", cfg.Taskset))
	case tasks == 0:
		tasks = desc.Len
	case desc.Len >= 0 && tasks > desc.Len:
		return nil, configError(fmt.Errorf("--tasks %d exceeds the %d tasks of %q; an eval does not wrap", tasks, desc.Len, cfg.Taskset))
	}
	if desc.Len < 0 && cfg.Shuffle {
		workflow.GetLogger(ctx).Warn("shuffle ignored: the taskset is infinite", "taskset", cfg.Taskset)
	}
	return &EvalState{Tasks: tasks, TasksetLen: desc.Len, StartedAt: workflow.Now(ctx)}, nil
}

// record adds a finished rollout to the totals and, once all of a task's
// rollouts are in, its pass@k.
func (st *EvalState) record(position int64, s rollout.Summary, n int, threshold float64) {
	st.Agg.add(s)
	passed := 0
	if s.Status == rollout.StatusOK && s.Reward >= threshold {
		passed = 1
	}
	r := 0
	if refused(s) {
		r = 1
	}
	if n == 1 {
		st.Agg.finishTask(1, passed, r > 0)
		return
	}
	for i := range st.Partial {
		t := &st.Partial[i]
		if t.Position != position {
			continue
		}
		t.Done++
		t.Passed += passed
		t.Refused += r
		if t.Done == n {
			st.Agg.finishTask(n, t.Passed, t.Refused > 0)
			st.Partial = append(st.Partial[:i], st.Partial[i+1:]...)
		}
		return
	}
	st.Partial = append(st.Partial, TaskTally{Position: position, Done: 1, Passed: passed, Refused: r})
}

func configError(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), rollout.ErrTypeConfig, nil)
}
