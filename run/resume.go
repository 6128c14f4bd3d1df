package run

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/evalflow/evalflow/workflows"
)

// Settings are the settings given for a resume: a run's configuration built
// from them, and which of them were given. Settings are named as the
// starter's flags are (tasks, group-size, harness, …).
type Settings struct {
	Config workflows.RunConfig
	Train  workflows.TrainConfig
	// Given reports whether a setting was given; nil gives none.
	Given func(name string) bool
	// Retaskset, when set and no taskset is given, is asked what the
	// run's stored taskset is now (a registry dataset resolved again):
	// an answer other than the stored one is a change of the taskset,
	// "" keeps it.
	Retaskset func(stored string) (string, error)
}

// Apply returns the stored input old with the given settings applied, and
// the names of those that changed it, in the order of the settings. A
// setting not given keeps the stored value, not its default.
func (s Settings) Apply(old workflows.TrainInput) (workflows.TrainInput, []string) {
	in := old
	var changed []string
	cfg, train := &in.Config, &in.Train
	given := &s.Config
	apply := func(name string, dst, src any) {
		if s.Given == nil || !s.Given(name) {
			return
		}
		d, v := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
		if !reflect.DeepEqual(d.Interface(), v.Interface()) {
			if !slices.Contains(changed, name) {
				changed = append(changed, name)
			}
			d.Set(v)
		}
	}
	apply("taskset", &cfg.Taskset, &given.Taskset)
	apply("tasks", &cfg.Tasks, &given.Tasks)
	apply("group-size", &cfg.RolloutsPerTask, &given.RolloutsPerTask)
	apply("max-concurrent", &cfg.MaxConcurrent, &given.MaxConcurrent)
	apply("seed", &cfg.Seed, &given.Seed)
	apply("shuffle", &cfg.Shuffle, &given.Shuffle)
	apply("model", &cfg.Model, &given.Model)
	apply("temperature", &cfg.Sampling.Temperature, &given.Sampling.Temperature)
	apply("top-p", &cfg.Sampling.TopP, &given.Sampling.TopP)
	apply("max-tokens", &cfg.Sampling.MaxTokens, &given.Sampling.MaxTokens)
	apply("harness", &cfg.Harness.Command, &given.Harness.Command)
	apply("harness", &cfg.Harness.Oracle, &given.Harness.Oracle)
	apply("harness-timeout", &cfg.Harness.Timeout, &given.Harness.Timeout)
	apply("harness-timeout", &cfg.Harness.TimeoutGiven, &given.Harness.TimeoutGiven)
	apply("verifier-timeout", &cfg.Harness.VerifierTimeout, &given.Harness.VerifierTimeout)
	apply("harness-dialect", &cfg.Harness.Dialect, &given.Harness.Dialect)
	apply("harness-env", &cfg.Harness.Env, &given.Harness.Env)
	apply("role", &cfg.Harness.Roles, &given.Harness.Roles)
	apply("max-turns", &cfg.Harness.MaxTurns, &given.Harness.MaxTurns)
	apply("max-tokens-total", &cfg.Harness.MaxTokensTotal, &given.Harness.MaxTokensTotal)
	apply("max-model-time", &cfg.Harness.MaxModelTime, &given.Harness.MaxModelTime)
	apply("max-cost", &cfg.Harness.MaxCostUSD, &given.Harness.MaxCostUSD)
	apply("trace-tokens", &cfg.Harness.TraceTokens, &given.Harness.TraceTokens)
	apply("top-logprobs", &cfg.Harness.TopLogprobs, &given.Harness.TopLogprobs)
	apply("token-in", &cfg.Harness.TokenIn, &given.Harness.TokenIn)
	apply("policy-version-header", &cfg.Harness.PolicyVersionHeader, &given.Harness.PolicyVersionHeader)
	apply("rubric", &cfg.Rubric, &given.Rubric)
	apply("max-attempts", &cfg.Limits.MaxAttempts, &given.Limits.MaxAttempts)
	apply("continue-as-new-after", &cfg.Limits.ContinueAsNewAfter, &given.Limits.ContinueAsNewAfter)
	apply("heartbeat-timeout", &cfg.Limits.HeartbeatTimeout, &given.Limits.HeartbeatTimeout)
	apply("epochs", &train.Epochs, &s.Train.Epochs)
	apply("max-failures", &train.MaxFailures, &s.Train.MaxFailures)
	// A run's cost bound is no change of what its rollouts are: raising it
	// goes on with the run (Resume).
	if s.Given != nil && s.Given("max-run-cost") {
		cfg.MaxRunCostUSD = given.MaxRunCostUSD
	}
	return in, changed
}

// ChangedError refuses to resume a run with settings other than those it
// was started with, unless forced.
type ChangedError struct {
	RunID string
	// Settings are the names of the settings that differ.
	Settings []string
	// Was is the configuration the run was started with, Now the one
	// asked for: what differs can be told in detail (the tasks of a
	// registry dataset now at other commits).
	Was, Now workflows.RunConfig
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("run %s was started with other settings (%v)", e.RunID, e.Settings)
}

// ResumeInput says which run to resume and how.
type ResumeInput struct {
	RunID     string
	TaskQueue string
	// Settings reads the settings given, when the run starts again (not
	// for a running or finished one); a change is refused unless Force.
	// Nil gives none.
	Settings func() (Settings, error)
	Force    bool
	// RetryFailed reruns the stored failures of the run (and resumes a
	// finished evaluation to do so). It is no change of the run's settings.
	RetryFailed bool
	// RunCostGiven says --max-run-cost was given: a finished evaluation
	// (one stopped at its bound) starts again under the bound given, its
	// stored rollouts reused. It is no change of the run's settings.
	RunCostGiven bool
	// Check, when set, vets the configuration the run goes on with; its
	// error refuses the resume (the starter's, a real model's run on a
	// worker that has only the offline mock).
	Check func(workflows.RunConfig) error
}

// Resumed is what Resume found and did.
type Resumed struct {
	// Kind is the run's workflow type: workflows.EvalName or TrainName.
	Kind string
	// Prior is the status the run's last execution had.
	Prior enumspb.WorkflowExecutionStatus
	// Started is the execution Resume started; nil when the run is
	// running, or has finished and is not rerun.
	Started *Started
	// StartedAt is when the run's last chain of executions started (its
	// first segment, when it continued as new).
	StartedAt time.Time
}

// Resume continues a run that failed, was terminated or was stopped:
// finished epochs and rollouts are reused from the store. A running run is
// left to run; a finished one is left alone, but for an evaluation whose
// failures are rerun. An unknown run is ErrNotFound, settings that differ
// from the run's a *ChangedError.
func Resume(ctx context.Context, c client.Client, in ResumeInput) (Resumed, error) {
	var r Resumed
	desc, err := c.DescribeWorkflowExecution(ctx, in.RunID, "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return r, fmt.Errorf("run %s: %w", in.RunID, ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("look up run %s: %w", in.RunID, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	r.Kind, r.Prior = info.GetType().GetName(), info.GetStatus()
	r.StartedAt = chainStart(ctx, c, info)
	execution := info.GetExecution().GetRunId()
	switch {
	case r.Prior == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		if in.Check != nil {
			old, err := startInput(ctx, c, in.RunID, execution)
			if err != nil {
				return r, err
			}
			return r, in.Check(old.Config)
		}
		return r, nil
	case r.Prior == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED && (r.Kind == workflows.TrainName || !in.RetryFailed && !in.RunCostGiven):
		return r, nil
	}
	old, err := startInput(ctx, c, in.RunID, execution)
	if err != nil {
		return r, err
	}
	var given Settings
	if in.Settings != nil {
		if given, err = in.Settings(); err != nil {
			return r, err
		}
	}
	if given.Retaskset != nil && (given.Given == nil || !given.Given("taskset")) {
		now, err := given.Retaskset(old.Config.Taskset)
		if err != nil {
			return r, err
		}
		if now != "" {
			given.Config.Taskset = now
			isGiven := given.Given
			given.Given = func(name string) bool { return name == "taskset" || isGiven != nil && isGiven(name) }
		}
	}
	next, changed := given.Apply(old)
	if len(changed) > 0 && !in.Force {
		return r, &ChangedError{RunID: in.RunID, Settings: changed, Was: old.Config, Now: next.Config}
	}
	next.Config.RetryFailed = in.RetryFailed
	if in.Check != nil {
		if err := in.Check(next.Config); err != nil {
			return r, err
		}
	}
	var s Started
	switch r.Kind {
	case workflows.TrainName:
		s, err = StartTrain(ctx, c, in.TaskQueue, next.Config, next.Train)
	case workflows.EvalName:
		// A sweep's cell resumed on its own keeps the sweep's run id and
		// its harness: the sweep's filters still find it.
		s, err = startAgain(ctx, c, in.TaskQueue, next.Config, info.GetSearchAttributes())
	case workflows.SweepName:
		// Every cell starts again, each reusing its own stored rollouts
		// (and rerunning its own failures with RetryFailed).
		var sw workflows.SweepInput
		if sw, err = sweepInput(ctx, c, in.RunID, execution); err == nil {
			sw.Config = next.Config
			s, err = StartSweep(ctx, c, in.TaskQueue, sw)
		}
	default:
		return r, fmt.Errorf("run %s is a %s, which cannot be resumed", in.RunID, r.Kind)
	}
	if err != nil {
		return r, err
	}
	r.Started = &s
	return r, nil
}

// startInput reads the input a run's execution was started with.
func startInput(ctx context.Context, c client.Client, workflowID, runID string) (workflows.TrainInput, error) {
	var in workflows.TrainInput
	err := decodeStart(ctx, c, workflowID, runID, &in)
	in.State = nil // a resume starts from the run store, not from a dead run's memory
	return in, err
}

// ReadSweep reads the cells and configuration of the sweep runID, as its
// last execution was started with.
func ReadSweep(ctx context.Context, c client.Client, runID string) (workflows.SweepInput, error) {
	return sweepInput(ctx, c, runID, "")
}

// sweepInput reads the input a sweep's execution was started with.
func sweepInput(ctx context.Context, c client.Client, workflowID, runID string) (workflows.SweepInput, error) {
	var in workflows.SweepInput
	return in, decodeStart(ctx, c, workflowID, runID, &in)
}

// decodeStart decodes into in the input a run's execution was started with.
func decodeStart(ctx context.Context, c client.Client, workflowID, runID string, in any) error {
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return fmt.Errorf("run %s has no history", workflowID)
	}
	ev, err := it.Next()
	if err != nil {
		return fmt.Errorf("read history of %s: %w", workflowID, err)
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return fmt.Errorf("run %s: history does not start with the run's input", workflowID)
	}
	if err := converter.GetDefaultDataConverter().FromPayloads(attrs.GetInput(), in); err != nil {
		return fmt.Errorf("decode the input of %s: %w", workflowID, err)
	}
	return nil
}
