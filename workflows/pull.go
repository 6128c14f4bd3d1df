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
	// UpdatePolicy announces the trainer's current policy version: the
	// rollouts scheduled after it are generated on it.
	UpdatePolicy = "policy"
)

// What a group does with a rollout past its staleness bound
// (RunGroupInput.OnStale).
const (
	// OnStaleRerun runs it again on the current version (the default).
	OnStaleRerun = "rerun"
	// OnStaleMark returns it marked stale.
	OnStaleMark = "mark"
)

// MaxStaleReruns bounds how often a stale rollout of a group is run again;
// a rollout still stale then is returned marked.
const MaxStaleReruns = 3

// policyVersions is the change that gives pull groups the run's policy
// version (rollout.Ref.PolicyVersion), annotates their summaries with it and
// reruns stale rollouts: histories recorded before it replay groups without.
const policyVersions = "policy-versions"

// RerunK is the k of the key of a stale rollout k's rerun-th rerun (from
// 1): past every group's own ks (below MaxGroupSize), so a rerun never
// takes another rollout's key, and the same for every replay or call
// again, so reruns are stored and reused like any rollout.
func RerunK(k, rerun int) int { return k + rerun*MaxGroupSize }

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
	// PolicyVersion is the policy version the trainer announced last
	// (UpdatePolicy); nil before any.
	PolicyVersion *int64 `json:"policy_version,omitempty"`
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
	// MaxOffPolicySteps bounds how many versions a rollout's oldest turn
	// may be behind the run's current policy version when the group's
	// rollouts are done; nil: no bound.
	MaxOffPolicySteps *int64 `json:"max_off_policy_steps,omitempty"`
	// OnStale is what happens to a rollout past the bound: OnStaleRerun
	// (empty: the default) or OnStaleMark.
	OnStale string `json:"on_stale,omitempty"`
}

// PolicyInput announces the trainer's policy version (UpdatePolicy).
type PolicyInput struct {
	Version int64 `json:"version"`
}

// PolicyResult is the policy version now current.
type PolicyResult struct {
	RunID   string `json:"run_id"`
	Version int64  `json:"version"`
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
	// PolicyVersion is the policy version the trainer announced last; nil
	// before any.
	PolicyVersion *int64 `json:"policy_version"`
}

// Pull serves a trainer: UpdateSample hands out positions of the durable
// cursor one at a time (updates are processed in order, so concurrent
// trainers get disjoint positions and coverage stays exact), UpdateRunGroup
// runs a group of rollouts of a sampled position, UpdatePolicy announces the
// trainer's policy version, UpdateClose ends the run.
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
	if err := setCheckedUpdate(ctx, p, UpdateRunGroup, p.checkGroup, p.runGroup); err != nil {
		return err
	}
	if err := setCheckedUpdate(ctx, p, UpdatePolicy, p.checkPolicy, p.setPolicy); err != nil {
		return err
	}
	return workflow.SetUpdateHandler(ctx, UpdateClose, p.close)
}

// setCheckedUpdate sets the handler of update name: handle runs once the
// run is ready and check passes. check also refuses a bad request before
// it enters the history, once the run is ready to tell.
func setCheckedUpdate[I, R any](ctx workflow.Context, p *pullRun, name string, check func(I) error, handle func(workflow.Context, I) (R, error)) error {
	checked := func(ctx workflow.Context, in I) (R, error) {
		var none R
		if err := workflow.Await(ctx, p.ready); err != nil {
			return none, err
		}
		if err := check(in); err != nil {
			return none, err
		}
		return handle(ctx, in)
	}
	validate := func(ctx workflow.Context, in I) error {
		if !p.ready() {
			return nil
		}
		return check(in)
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, name, checked, workflow.UpdateHandlerOptions{Validator: validate})
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
		PolicyVersion: p.policyVersion(),
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
	case in.MaxOffPolicySteps != nil && *in.MaxOffPolicySteps < 0:
		return fmt.Errorf("max_off_policy_steps %d is negative (0 accepts only the current version; leave it out for no bound)", *in.MaxOffPolicySteps)
	case in.OnStale != "" && in.OnStale != OnStaleRerun && in.OnStale != OnStaleMark:
		return fmt.Errorf("on_stale %q is neither %q nor %q", in.OnStale, OnStaleRerun, OnStaleMark)
	}
	return nil
}

// runGroup runs a group of rollouts of a sampled position and scores it,
// once the run is ready and checkGroup passed.
func (p *pullRun) runGroup(ctx workflow.Context, in RunGroupInput) (GroupResult, error) {
	p.running++
	defer func() { p.running-- }()
	res := GroupResult{Ref: p.ref(in.Position)}
	versioned := workflow.GetVersion(ctx, policyVersions, workflow.DefaultVersion, 1) >= 1
	ks := make([]int, in.N)
	for k := range ks {
		ks[k] = k
	}
	var err error
	if res.Rollouts, err = p.rollouts(ctx, res.Ref, ks, versioned); err != nil {
		return GroupResult{}, err
	}
	keys := make([]string, in.N)
	for k := range keys {
		keys[k] = rollout.Key(p.cfg.RunID, res.Ref.Epoch, res.Ref.Index, k)
	}
	if versioned {
		if res.Rollouts, err = p.settle(ctx, res.Ref, in, res.Rollouts); err != nil {
			return GroupResult{}, err
		}
		for k, s := range res.Rollouts {
			if s.Key != "" {
				keys[k] = s.Key
			}
		}
	}
	if res.Group, err = p.score(ctx, res.Ref, keys); err != nil {
		return GroupResult{}, err
	}
	p.st.Groups++
	return res, nil
}

// rollouts runs the rollouts of the task r names whose keys' ks are ks,
// sharing the run's window with every other group, and returns their
// summaries in the order of ks. versioned rollouts are generated on the
// policy version current when each gets its place in the window.
func (p *pullRun) rollouts(ctx workflow.Context, r TaskRef, ks []int, versioned bool) ([]rollout.Summary, error) {
	cfg := p.cfg
	out := make([]rollout.Summary, len(ks))
	var fatal error
	remaining := len(ks)
	for i, k := range ks {
		if err := workflow.Await(ctx, func() bool { return p.win.running < p.win.max }); err != nil {
			return nil, err
		}
		p.win.running++
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer func() { p.win.running--; remaining-- }()
			ref := rollout.Ref{
				RunID: cfg.RunID, Epoch: r.Epoch, Index: r.Index, K: k,
				Taskset: cfg.Taskset, Model: cfg.Model, Sampling: cfg.Sampling,
				Harness: cfg.Harness, Rubric: cfg.Rubric, RetryFailed: true,
			}
			if versioned {
				ref.PolicyVersion = p.policyVersion()
			}
			s, err := p.win.run(ctx, ref)
			if err != nil && fatal == nil {
				fatal = err
			}
			out[i] = s
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

// settle holds a group's rollouts to its staleness bound once they are
// done: a rollout whose oldest turn is more than in.MaxOffPolicySteps
// versions behind the current one runs again under a new key (RerunK), up
// to MaxStaleReruns times, unless in.OnStale asks to mark it. Every
// summary then says how far off policy it is.
func (p *pullRun) settle(ctx workflow.Context, r TaskRef, in RunGroupInput, out []rollout.Summary) ([]rollout.Summary, error) {
	stale := func(s rollout.Summary) bool {
		return in.MaxOffPolicySteps != nil && p.offPolicy(s) > *in.MaxOffPolicySteps
	}
	for rerun := 1; in.OnStale != OnStaleMark && rerun <= MaxStaleReruns; rerun++ {
		var at, ks []int
		for k, s := range out {
			if stale(s) {
				at = append(at, k)
				ks = append(ks, RerunK(k, rerun))
			}
		}
		if len(at) == 0 {
			break
		}
		again, err := p.rollouts(ctx, r, ks, true)
		if err != nil {
			return nil, err
		}
		for i, k := range at {
			again[i].StaleReruns = rerun
			out[k] = again[i]
		}
	}
	for k := range out {
		out[k].OffPolicySteps = p.offPolicy(out[k])
		out[k].Stale = stale(out[k])
	}
	return out, nil
}

// offPolicy is how many versions s's oldest turn is behind the current
// policy version: 0 when either is unknown.
func (p *pullRun) offPolicy(s rollout.Summary) int64 {
	cur := p.st.PolicyVersion
	if cur == nil || s.PolicyVersion == nil || *s.PolicyVersion >= *cur {
		return 0
	}
	return *cur - *s.PolicyVersion
}

// policyVersion is a copy of the current policy version, or nil.
func (p *pullRun) policyVersion() *int64 {
	if p.st == nil || p.st.PolicyVersion == nil {
		return nil
	}
	v := *p.st.PolicyVersion
	return &v
}

// checkPolicy reports why version cannot become current, or nil.
func (p *pullRun) checkPolicy(in PolicyInput) error {
	switch {
	case in.Version < 0:
		return fmt.Errorf("policy version %d is negative: versions count up from 0", in.Version)
	case p.st.PolicyVersion != nil && in.Version < *p.st.PolicyVersion:
		return fmt.Errorf("policy version %d is behind the run's current version %d: versions only go forward", in.Version, *p.st.PolicyVersion)
	}
	return nil
}

// setPolicy makes in.Version the run's current policy version: rollouts
// scheduled from now on, also those of running groups still waiting for a
// place, are generated on it. Announcing the current version again is a
// no-op. It runs once the run is ready and checkPolicy passed.
func (p *pullRun) setPolicy(ctx workflow.Context, in PolicyInput) (PolicyResult, error) {
	v := in.Version
	p.st.PolicyVersion = &v
	return PolicyResult{RunID: p.cfg.RunID, Version: v}, nil
}

// score scores the group of rollouts with keys of the task r names.
func (p *pullRun) score(ctx workflow.Context, r TaskRef, keys []string) (rollout.GroupSummary, error) {
	cfg := p.cfg
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
