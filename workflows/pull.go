package workflows

import (
	"fmt"
	"time"

	"github.com/evalflow/evalflow/rollout"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// PullName is the registered name of the Pull workflow.
const PullName = "PullWorkflow"

// Updates a Pull workflow handles.
const (
	// UpdateSample advances the run's cursor and returns a TaskRef.
	UpdateSample = "sample"
	// UpdateRunGroup runs a group of rollouts of a sampled position.
	UpdateRunGroup = "run_group"
	// UpdateClose ends the run once running groups finish.
	UpdateClose = "close"
)

// MaxGroupSize bounds RunGroupInput.N.
const MaxGroupSize = 256

// PullInput starts or continues a pull run: a trainer samples positions and
// runs groups of rollouts on them, at its own pace.
type PullInput struct {
	Config RunConfig   `json:"config"`
	Train  TrainConfig `json:"train"`
	State  *PullState  `json:"state,omitempty"`
}

// PullState is what a pull run carries through continue-as-new.
type PullState struct {
	TasksetLen int64     `json:"taskset_len"`
	Tasks      int64     `json:"tasks"`
	Next       int64     `json:"next"`
	Groups     int64     `json:"groups"`
	Closed     bool      `json:"closed,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	Segment    int       `json:"segment"`
}

// TaskRef names a sampled task by its position in the run. The task itself
// is resolved by the workers from the taskset, never taken from a caller.
type TaskRef struct {
	RunID    string `json:"run_id"`
	Position int64  `json:"position"`
	Epoch    int    `json:"epoch"`
	Index    int64  `json:"index"`
}

// RunGroupInput asks for N rollouts of the task at a sampled position.
type RunGroupInput struct {
	Position int64 `json:"position"`
	N        int   `json:"n"`
}

// GroupResult is a group's rollouts (each naming its trace in the run
// store) and its group scores.
type GroupResult struct {
	Ref      TaskRef              `json:"ref"`
	Rollouts []rollout.Summary    `json:"rollouts"`
	Group    rollout.GroupSummary `json:"group"`
}

// PullProgress is what a pull run's progress query returns. The task
// counts are zero until the run has described its taskset.
type PullProgress struct {
	RunID   string `json:"run_id"`
	Sampled int64  `json:"sampled"`
	Groups  int64  `json:"groups"`
	Running int    `json:"running"`
	// Tasks is how many tasks an epoch serves; TasksetLen is the
	// taskset's size (-1: infinite).
	Tasks      int64 `json:"tasks"`
	TasksetLen int64 `json:"taskset_len"`
	// Epochs bounds the positions handed out (Epochs × Tasks); 0: no bound.
	Epochs int  `json:"epochs"`
	Closed bool `json:"closed"`
}

// Pull serves a trainer: UpdateSample hands out positions of the durable
// cursor one at a time (updates are processed in order, so concurrent
// trainers get disjoint positions and coverage stays exact), UpdateRunGroup
// runs a group of rollouts of a sampled position, UpdateClose ends the run.
func Pull(ctx workflow.Context, in PullInput) (PullProgress, error) {
	p := &pullRun{cfg: in.Config.WithDefaults(), train: in.Train, st: in.State, limit: -1}
	p.win = newWindow(ctx, p.cfg.MaxConcurrent, p.cfg.Limits)
	// Handlers are registered before the run's first activity, so that
	// updates sent right after the start are not refused; they wait until
	// the run knows its taskset.
	if err := p.register(ctx); err != nil {
		return PullProgress{}, err
	}
	if err := p.start(ctx); err != nil {
		return PullProgress{}, err
	}
	err := workflow.Await(ctx, func() bool {
		return (p.st.Closed || workflow.GetInfo(ctx).GetContinueAsNewSuggested()) && workflow.AllHandlersFinished(ctx)
	})
	if err != nil {
		return PullProgress{}, err
	}
	if !p.st.Closed {
		p.st.Segment++
		return PullProgress{}, workflow.NewContinueAsNewError(ctx, Pull, PullInput{Config: p.cfg, Train: p.train, State: p.st})
	}
	return p.progress()
}

// pullRun is one workflow run of a pull run. Its state is nil until the run
// knows its taskset; handlers wait for it (ready).
type pullRun struct {
	cfg    RunConfig
	train  TrainConfig
	st     *PullState
	cursor *Cursor
	// limit is how many positions the run hands out, -1 for no limit.
	limit int64
	// running counts the groups in flight.
	running int
	win     *window
}

// register sets the progress query and the update handlers.
func (p *pullRun) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryProgress, p.progress); err != nil {
		return err
	}
	err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateSample, p.sample,
		workflow.UpdateHandlerOptions{Validator: p.validateSample})
	if err != nil {
		return err
	}
	err = workflow.SetUpdateHandlerWithOptions(ctx, UpdateRunGroup, p.runGroup,
		workflow.UpdateHandlerOptions{Validator: p.validateGroup})
	if err != nil {
		return err
	}
	return workflow.SetUpdateHandler(ctx, UpdateClose, p.close)
}

// start reads the taskset on the first run and sets up the cursor.
func (p *pullRun) start(ctx workflow.Context) error {
	if p.st == nil {
		ts, err := startTrain(ctx, p.cfg, p.train)
		if err != nil {
			return err
		}
		p.st = &PullState{TasksetLen: ts.TasksetLen, Tasks: ts.Tasks, StartedAt: ts.StartedAt}
	}
	p.cursor = NewCursor(p.st.TasksetLen, p.cfg.Seed, p.cfg.Shuffle)
	if p.train.Epochs > 0 {
		p.limit = int64(p.train.Epochs) * p.st.Tasks
	}
	return nil
}

func (p *pullRun) ready() bool { return p.st != nil }

// ref names the task at position pos of the run.
func (p *pullRun) ref(pos int64) TaskRef {
	epoch, index := p.cursor.Take(pos, p.st.Tasks)
	return TaskRef{RunID: p.cfg.RunID, Position: pos, Epoch: epoch, Index: index}
}

// progress answers the progress query.
func (p *pullRun) progress() (PullProgress, error) {
	if p.st == nil {
		return PullProgress{RunID: p.cfg.RunID, Epochs: p.train.Epochs}, nil
	}
	return PullProgress{
		RunID: p.cfg.RunID, Sampled: p.st.Next, Groups: p.st.Groups, Running: p.running,
		Tasks: p.st.Tasks, TasksetLen: p.st.TasksetLen, Epochs: p.train.Epochs, Closed: p.st.Closed,
	}, nil
}

// checkSample reports why no position can be handed out, or nil.
func (p *pullRun) checkSample() error {
	switch {
	case p.st.Closed:
		return fmt.Errorf("run %s is closed", p.cfg.RunID)
	case p.limit >= 0 && p.st.Next >= p.limit:
		return fmt.Errorf("run %s has handed out all %d positions of its %d epochs", p.cfg.RunID, p.limit, p.train.Epochs)
	}
	return nil
}

// validateSample refuses a sample before it enters the history, once the
// run is ready to tell.
func (p *pullRun) validateSample(ctx workflow.Context) error {
	if !p.ready() {
		return nil
	}
	return p.checkSample()
}

// sample hands out the cursor's next position.
func (p *pullRun) sample(ctx workflow.Context) (TaskRef, error) {
	if err := workflow.Await(ctx, p.ready); err != nil {
		return TaskRef{}, err
	}
	if err := p.checkSample(); err != nil {
		return TaskRef{}, err
	}
	r := p.ref(p.st.Next)
	p.st.Next++
	return r, nil
}

// checkGroup reports what is wrong with a group request, or nil.
func (p *pullRun) checkGroup(in RunGroupInput) error {
	switch {
	case p.st.Closed:
		return fmt.Errorf("run %s is closed", p.cfg.RunID)
	case in.Position < 0 || in.Position >= p.st.Next:
		return fmt.Errorf("position %d was never sampled from run %s (sample first; %d positions handed out)", in.Position, p.cfg.RunID, p.st.Next)
	case in.N < 1 || in.N > MaxGroupSize:
		return fmt.Errorf("group size %d is outside 1..%d", in.N, MaxGroupSize)
	}
	return nil
}

// validateGroup refuses a bad group request before it enters the history,
// once the run is ready to tell.
func (p *pullRun) validateGroup(ctx workflow.Context, in RunGroupInput) error {
	if !p.ready() {
		return nil
	}
	return p.checkGroup(in)
}

// runGroup runs a group of rollouts of a sampled position and scores it.
func (p *pullRun) runGroup(ctx workflow.Context, in RunGroupInput) (GroupResult, error) {
	if err := workflow.Await(ctx, p.ready); err != nil {
		return GroupResult{}, err
	}
	if err := p.checkGroup(in); err != nil {
		return GroupResult{}, err
	}
	p.running++
	defer func() { p.running-- }()
	res := GroupResult{Ref: p.ref(in.Position)}
	var err error
	if res.Rollouts, err = p.rollouts(ctx, res.Ref, in.N); err != nil {
		return GroupResult{}, err
	}
	if res.Group, err = p.score(ctx, res.Ref, in.N); err != nil {
		return GroupResult{}, err
	}
	p.st.Groups++
	return res, nil
}

// rollouts runs n rollouts of the task r names, sharing the run's window
// with every other group, and returns their summaries by k.
func (p *pullRun) rollouts(ctx workflow.Context, r TaskRef, n int) ([]rollout.Summary, error) {
	cfg := p.cfg
	out := make([]rollout.Summary, n)
	var fatal error
	remaining := n
	for k := range n {
		if err := workflow.Await(ctx, func() bool { return p.win.running < p.win.max }); err != nil {
			return nil, err
		}
		p.win.running++
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer func() { p.win.running--; remaining-- }()
			s, err := p.win.run(ctx, rollout.Ref{
				RunID: cfg.RunID, Epoch: r.Epoch, Index: r.Index, K: k,
				Taskset: cfg.Taskset, Model: cfg.Model, Sampling: cfg.Sampling,
				Harness: cfg.Harness, Rubric: cfg.Rubric, RetryFailed: true,
			})
			if err != nil && fatal == nil {
				fatal = err
			}
			out[k] = s
		})
	}
	if err := workflow.Await(ctx, func() bool { return remaining == 0 }); err != nil {
		return nil, err
	}
	if fatal != nil {
		return nil, fatal
	}
	return out, nil
}

// score scores the group of n rollouts of the task r names.
func (p *pullRun) score(ctx workflow.Context, r TaskRef, n int) (rollout.GroupSummary, error) {
	cfg := p.cfg
	keys := make([]string, n)
	for k := range keys {
		keys[k] = rollout.Key(cfg.RunID, r.Epoch, r.Index, k)
	}
	scoreCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5, NonRetryableErrorTypes: []string{rollout.ErrTypeConfig}},
	})
	var g rollout.GroupSummary
	err := workflow.ExecuteActivity(scoreCtx, rollout.ActivityScoreGroup, rollout.ScoreGroupInput{
		RunID: cfg.RunID, Epoch: r.Epoch, Index: r.Index, Taskset: cfg.Taskset, Rubric: cfg.Rubric, Keys: keys,
	}).Get(ctx, &g)
	return g, err
}

// close ends the run once running groups finish.
func (p *pullRun) close(ctx workflow.Context) error {
	if err := workflow.Await(ctx, p.ready); err != nil {
		return err
	}
	p.st.Closed = true
	return nil
}
