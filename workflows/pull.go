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

// GroupResult is a group's rollouts (with their trace files, relative to the
// run's directory) and its group scores.
type GroupResult struct {
	Ref      TaskRef              `json:"ref"`
	Rollouts []rollout.Summary    `json:"rollouts"`
	Group    rollout.GroupSummary `json:"group"`
}

// PullProgress is what a pull run's progress query returns.
type PullProgress struct {
	RunID   string `json:"run_id"`
	Sampled int64  `json:"sampled"`
	Groups  int64  `json:"groups"`
	Running int    `json:"running"`
}

// Pull serves a trainer: UpdateSample hands out positions of the durable
// cursor one at a time (updates are processed in order, so concurrent
// trainers get disjoint positions and coverage stays exact), UpdateRunGroup
// runs a group of rollouts of a sampled position, UpdateClose ends the run.
func Pull(ctx workflow.Context, in PullInput) (PullProgress, error) {
	cfg := in.Config.WithDefaults()
	// Handlers are registered before the run's first activity, so that
	// updates sent right after the start are not refused; they wait until
	// the run knows its taskset.
	st := in.State
	ready := func() bool { return st != nil }
	var cursor *Cursor
	limit := int64(-1)
	running := 0
	ref := func(p int64) TaskRef {
		epoch, index := cursor.Take(p, st.Tasks)
		return TaskRef{RunID: cfg.RunID, Position: p, Epoch: epoch, Index: index}
	}
	progress := func() (PullProgress, error) {
		if st == nil {
			return PullProgress{RunID: cfg.RunID}, nil
		}
		return PullProgress{RunID: cfg.RunID, Sampled: st.Next, Groups: st.Groups, Running: running}, nil
	}
	if err := workflow.SetQueryHandler(ctx, QueryProgress, progress); err != nil {
		return PullProgress{}, err
	}

	checkSample := func() error {
		switch {
		case st.Closed:
			return fmt.Errorf("run %s is closed", cfg.RunID)
		case limit >= 0 && st.Next >= limit:
			return fmt.Errorf("run %s has handed out all %d positions of its %d epochs", cfg.RunID, limit, in.Train.Epochs)
		}
		return nil
	}
	err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateSample, func(ctx workflow.Context) (TaskRef, error) {
		if err := workflow.Await(ctx, ready); err != nil {
			return TaskRef{}, err
		}
		if err := checkSample(); err != nil {
			return TaskRef{}, err
		}
		r := ref(st.Next)
		st.Next++
		return r, nil
	}, workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context) error {
		if !ready() {
			return nil
		}
		return checkSample()
	}})
	if err != nil {
		return PullProgress{}, err
	}

	checkGroup := func(in RunGroupInput) error {
		switch {
		case st.Closed:
			return fmt.Errorf("run %s is closed", cfg.RunID)
		case in.Position < 0 || in.Position >= st.Next:
			return fmt.Errorf("position %d was never sampled from run %s (sample first; %d positions handed out)", in.Position, cfg.RunID, st.Next)
		case in.N < 1 || in.N > MaxGroupSize:
			return fmt.Errorf("group size %d is outside 1..%d", in.N, MaxGroupSize)
		}
		return nil
	}
	win := &window{max: cfg.MaxConcurrent, lim: cfg.Limits}
	err = workflow.SetUpdateHandlerWithOptions(ctx, UpdateRunGroup, func(ctx workflow.Context, in RunGroupInput) (GroupResult, error) {
		if err := workflow.Await(ctx, ready); err != nil {
			return GroupResult{}, err
		}
		if err := checkGroup(in); err != nil {
			return GroupResult{}, err
		}
		running++
		defer func() { running-- }()
		r := ref(in.Position)
		res := GroupResult{Ref: r, Rollouts: make([]rollout.Summary, in.N)}
		var fatal error
		remaining := in.N
		for k := range in.N {
			// Share the run's window with every other group.
			if err := workflow.Await(ctx, func() bool { return win.running < win.max }); err != nil {
				return GroupResult{}, err
			}
			win.running++
			workflow.Go(ctx, func(ctx workflow.Context) {
				defer func() { win.running--; remaining-- }()
				s, err := runRollout(ctx, rollout.Ref{
					RunID: cfg.RunID, Epoch: r.Epoch, Index: r.Index, K: k,
					Taskset: cfg.Taskset, Model: cfg.Model, Sampling: cfg.Sampling,
					Harness: cfg.Harness, Rubric: cfg.Rubric, RetryFailed: true,
				}, cfg.Limits)
				if err != nil && fatal == nil {
					fatal = err
				}
				res.Rollouts[k] = s
			})
		}
		if err := workflow.Await(ctx, func() bool { return remaining == 0 }); err != nil {
			return GroupResult{}, err
		}
		if fatal != nil {
			return GroupResult{}, fatal
		}
		keys := make([]string, in.N)
		for k := range keys {
			keys[k] = rollout.Key(cfg.RunID, r.Epoch, r.Index, k)
		}
		scoreCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute,
			RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5, NonRetryableErrorTypes: []string{rollout.ErrTypeConfig}},
		})
		if err := workflow.ExecuteActivity(scoreCtx, rollout.ActivityScoreGroup, rollout.ScoreGroupInput{
			RunID: cfg.RunID, Epoch: r.Epoch, Index: r.Index, Taskset: cfg.Taskset, Rubric: cfg.Rubric, Keys: keys,
		}).Get(ctx, &res.Group); err != nil {
			return GroupResult{}, err
		}
		st.Groups++
		return res, nil
	}, workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in RunGroupInput) error {
		if !ready() {
			return nil
		}
		return checkGroup(in)
	}})
	if err != nil {
		return PullProgress{}, err
	}
	err = workflow.SetUpdateHandler(ctx, UpdateClose, func(ctx workflow.Context) error {
		if err := workflow.Await(ctx, ready); err != nil {
			return err
		}
		st.Closed = true
		return nil
	})
	if err != nil {
		return PullProgress{}, err
	}

	if st == nil {
		ts, err := startTrain(ctx, cfg, in.Train)
		if err != nil {
			return PullProgress{}, err
		}
		st = &PullState{TasksetLen: ts.TasksetLen, Tasks: ts.Tasks, StartedAt: ts.StartedAt}
	}
	cursor = NewCursor(st.TasksetLen, cfg.Seed, cfg.Shuffle)
	if in.Train.Epochs > 0 {
		limit = int64(in.Train.Epochs) * st.Tasks
	}

	err = workflow.Await(ctx, func() bool {
		return (st.Closed || workflow.GetInfo(ctx).GetContinueAsNewSuggested()) && workflow.AllHandlersFinished(ctx)
	})
	if err != nil {
		return PullProgress{}, err
	}
	if !st.Closed {
		st.Segment++
		return PullProgress{}, workflow.NewContinueAsNewError(ctx, Pull, PullInput{Config: cfg, Train: in.Train, State: st})
	}
	return progress()
}
