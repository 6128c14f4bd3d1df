package workflows

import (
	"fmt"
	"time"

	"github.com/evalflow/evalflow/rollout"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// EpochName is the registered name of the Epoch workflow.
const EpochName = "EpochWorkflow"

// ErrEpochFailed is the error type of an epoch that failed more rollouts
// than its run allows.
const ErrEpochFailed = "EpochFailed"

// TrainConfig is what a training run adds to a RunConfig. The group size is
// RunConfig.RolloutsPerTask.
type TrainConfig struct {
	// Epochs to run; 0 runs until stopped.
	Epochs int `json:"epochs"`
	// MaxFailures fails an epoch with more failed rollouts than this: a count
	// when at least 1, a fraction of the epoch's rollouts when below 1, no
	// limit when 0.
	MaxFailures float64 `json:"max_failures"`
}

// Validate reports the first thing wrong with t, as a *FieldError.
func (t TrainConfig) Validate() error {
	return firstError(atLeast("epochs", t.Epochs, 0), notNegative("max_failures", t.MaxFailures, ""))
}

// failureLimit is the most failed rollouts an epoch of units rollouts may
// have, or -1 for no limit.
func (t TrainConfig) failureLimit(units int64) int64 {
	switch {
	case t.MaxFailures <= 0:
		return -1
	case t.MaxFailures >= 1:
		return int64(t.MaxFailures)
	}
	return int64(t.MaxFailures * float64(units))
}

// EpochInput starts or continues one epoch of a training run.
type EpochInput struct {
	Config     RunConfig   `json:"config"`
	Train      TrainConfig `json:"train"`
	Epoch      int         `json:"epoch"`
	TasksetLen int64       `json:"taskset_len"`
	// Tasks is how many tasks the epoch covers.
	Tasks int64       `json:"tasks"`
	State *EpochState `json:"state,omitempty"`
}

// EpochState is what an epoch carries through continue-as-new.
type EpochState struct {
	Next      int64        `json:"next"`
	Agg       Aggregates   `json:"agg"`
	Open      []GroupTally `json:"open,omitempty"`
	Groups    GroupStats   `json:"groups"`
	StartedAt time.Time    `json:"started_at"`
	Segment   int          `json:"segment"`
}

// GroupTally follows a task whose group of rollouts is not finished yet.
type GroupTally struct {
	Position int64 `json:"position"`
	Index    int64 `json:"index"`
	Done     int   `json:"done"`
	Passed   int   `json:"passed"`
	Refused  int   `json:"refused,omitempty"`
}

// GroupStats sums the scored groups of an epoch.
type GroupStats struct {
	Count   int64   `json:"count"`
	MeanSum float64 `json:"mean_sum"`
	StdSum  float64 `json:"std_sum"`
}

// EpochResult is a finished epoch's metrics.
type EpochResult struct {
	Epoch int    `json:"epoch"`
	Run   Result `json:"run"`
	// Ran counts the rollouts this epoch ran; the rest were reused.
	Ran    int64 `json:"ran"`
	Groups int64 `json:"groups"`
	// MeanGroupStd is the mean over groups of the reward's standard deviation
	// within a group: how much signal the group carries for a trainer.
	MeanGroupStd float64 `json:"mean_group_std"`
}

// EpochProgress is what an epoch's progress query returns.
type EpochProgress struct {
	Progress
	Epoch int `json:"epoch"`
}

// Epoch runs one epoch: every task of the epoch's permutation once, each as
// a group of RolloutsPerTask rollouts scored together.
func Epoch(ctx workflow.Context, in EpochInput) (EpochResult, error) {
	e := newEpochRun(ctx, in)
	if err := workflow.SetQueryHandler(ctx, QueryProgress, e.progress); err != nil {
		return EpochResult{}, err
	}
	fatal := e.win.drive(ctx, e.next, func(position int64, s rollout.Summary) { e.done(ctx, position, s) })
	if err := workflow.Await(ctx, func() bool { return e.scoring == 0 }); err != nil {
		return EpochResult{}, err
	}
	if fatal != nil {
		return EpochResult{}, fatal
	}
	if e.tooMany() || e.st.Next >= e.units {
		showFigures(ctx, e.win, figures(e.st.Agg, e.units, 0, true))
	}
	if e.tooMany() {
		return EpochResult{}, e.failed()
	}
	if e.st.Next < e.units {
		e.st.Segment++
		in.State = e.st
		return EpochResult{}, workflow.NewContinueAsNewError(ctx, Epoch, in)
	}
	return e.finish(ctx)
}

// epochRun is one workflow run of an epoch: its settings, its state and the
// rollouts and group scorings in flight.
type epochRun struct {
	in    EpochInput
	cfg   RunConfig
	st    *EpochState
	group int64 // rollouts per task
	units int64 // rollouts in the epoch
	limit int64 // most failed rollouts allowed, -1 for no limit
	win   *window
	cur   *Cursor
	// started counts the rollouts this workflow run started, for continue-as-new.
	started int
	// scoring counts the groups whose scoring is in flight.
	scoring  int
	scoreCtx workflow.Context
}

func newEpochRun(ctx workflow.Context, in EpochInput) *epochRun {
	cfg := in.Config.WithDefaults()
	st := in.State
	if st == nil {
		st = &EpochState{StartedAt: workflow.Now(ctx)}
	}
	g := int64(cfg.RolloutsPerTask)
	units := in.Tasks * g
	return &epochRun{
		in: in, cfg: cfg, st: st, group: g, units: units,
		limit: in.Train.failureLimit(units),
		win:   newWindow(ctx, cfg.MaxConcurrent, cfg.Limits),
		cur:   NewCursor(in.TasksetLen, cfg.Seed, cfg.Shuffle),
		scoreCtx: workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute,
			RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5, NonRetryableErrorTypes: []string{rollout.ErrTypeConfig}},
		}),
	}
}

// progress answers the progress query.
func (e *epochRun) progress() (EpochProgress, error) {
	st := e.st
	return EpochProgress{Epoch: e.in.Epoch, Progress: Progress{
		RunID: e.cfg.RunID, Tasks: e.in.Tasks, Rollouts: e.units, Done: st.Agg.Rollouts, Failed: st.Agg.Failed,
		Running: e.win.running, Reused: st.Agg.Reused, MeanReward: st.Agg.Mean(), StartedAt: st.StartedAt, Segment: st.Segment,
	}}, nil
}

// tooMany reports whether the epoch failed more rollouts than it may.
func (e *epochRun) tooMany() bool { return e.limit >= 0 && e.st.Agg.Failed > e.limit }

// next offers the window the epoch's next rollout: unit u is sample u % group
// of the task at position u / group of the epoch's permutation.
func (e *epochRun) next() (pending, bool) {
	if e.tooMany() || e.st.Next >= e.units || e.started >= e.cfg.Limits.ContinueAsNewAfter {
		return pending{}, false
	}
	u := e.st.Next
	e.st.Next++
	e.started++
	position := u / e.group
	epoch, index := e.cur.Take(int64(e.in.Epoch)*e.in.Tasks+position, e.in.Tasks)
	cfg := e.cfg
	return pending{position: position, ref: rollout.Ref{
		RunID: cfg.RunID, Epoch: epoch, Index: index, K: int(u % e.group),
		Taskset: cfg.Taskset, Model: cfg.Model, Sampling: cfg.Sampling,
		Harness: cfg.Harness, Rubric: cfg.Rubric, RetryFailed: true,
	}}, true
}

// done counts a finished rollout and, once its task's group is complete,
// starts scoring the group.
func (e *epochRun) done(ctx workflow.Context, position int64, s rollout.Summary) {
	st := e.st
	st.Agg.add(s)
	showFigures(ctx, e.win, figures(st.Agg, e.units, e.win.running, false))
	t := st.tally(position, s.Index)
	t.Done++
	if s.Status == rollout.StatusOK && s.Reward >= e.cfg.Limits.PassThreshold {
		t.Passed++
	}
	if refused(s) {
		t.Refused++
	}
	if int64(t.Done) < e.group {
		return
	}
	st.Agg.finishTask(int(e.group), t.Passed, t.Refused > 0)
	st.close(position)
	e.scoreGroup(ctx, s.Index)
}

// scoreGroup scores the group of the task at index in the background; a
// group that cannot be scored is logged and left out of the group stats.
func (e *epochRun) scoreGroup(ctx workflow.Context, index int64) {
	cfg := e.cfg
	keys := make([]string, e.group)
	for k := range keys {
		keys[k] = rollout.Key(cfg.RunID, e.in.Epoch, index, k)
	}
	e.scoring++
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() { e.scoring-- }()
		var gs rollout.GroupSummary
		err := workflow.ExecuteActivity(e.scoreCtx, rollout.ActivityScoreGroup, rollout.ScoreGroupInput{
			RunID: cfg.RunID, Epoch: e.in.Epoch, Index: index, Taskset: cfg.Taskset, Rubric: cfg.Rubric, Keys: keys,
		}).Get(ctx, &gs)
		if err != nil {
			workflow.GetLogger(ctx).Warn("group not scored", "epoch", e.in.Epoch, "index", index, "error", err)
			return
		}
		e.st.Groups.Count++
		e.st.Groups.MeanSum += gs.Mean
		e.st.Groups.StdSum += gs.Std
	})
}

// failed is the error of an epoch past its failure limit.
func (e *epochRun) failed() error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"epoch %d: %d of %d rollouts failed, more than --max-failures %v allows (%s)",
		e.in.Epoch, e.st.Agg.Failed, e.units, e.in.Train.MaxFailures, errorKinds(e.st.Agg.Errors)), ErrEpochFailed, nil)
}

// finish records the finished epoch in the run store and returns its result.
func (e *epochRun) finish(ctx workflow.Context) (EpochResult, error) {
	st := e.st
	res := EpochResult{
		Epoch: e.in.Epoch, Run: st.Agg.result(e.cfg, e.in.Tasks, st.StartedAt, workflow.Now(ctx), st.Segment+1),
		Ran: st.Agg.Rollouts - st.Agg.Reused, Groups: st.Groups.Count,
	}
	if st.Groups.Count > 0 {
		res.MeanGroupStd = st.Groups.StdSum / float64(st.Groups.Count)
	}
	finishCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	if err := workflow.ExecuteActivity(finishCtx, rollout.ActivityFinishEpoch, rollout.FinishEpochInput{RunID: e.cfg.RunID, Epoch: e.in.Epoch, Result: res}).Get(ctx, nil); err != nil {
		// Without the record a resume would rerun nothing but reuse every
		// rollout; still, fail so that the epoch's completion is never lost.
		return EpochResult{}, err
	}
	return res, nil
}

func (st *EpochState) tally(position, index int64) *GroupTally {
	for i := range st.Open {
		if st.Open[i].Position == position {
			return &st.Open[i]
		}
	}
	st.Open = append(st.Open, GroupTally{Position: position, Index: index})
	return &st.Open[len(st.Open)-1]
}

func (st *EpochState) close(position int64) {
	for i := range st.Open {
		if st.Open[i].Position == position {
			st.Open = append(st.Open[:i], st.Open[i+1:]...)
			return
		}
	}
}

func errorKinds(kinds []KindCount) string {
	s := ""
	for i, k := range kinds {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %d", k.Kind, k.Count)
	}
	return s
}
