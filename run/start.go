package run

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/workflows"
)

// Started is a run's workflow started.
type Started struct {
	// NoSearchAttributes is true when the namespace lacks evalflow's
	// search attributes (a cluster set up without them) and the run was
	// started without them.
	NoSearchAttributes bool
}

// Start starts an evaluation's workflow on taskQueue under the run's id.
func Start(ctx context.Context, c client.Client, taskQueue string, cfg workflows.RunConfig) (Started, error) {
	return start(ctx, c, taskQueue, cfg, "eval", workflows.EvalName, workflows.EvalInput{Config: cfg})
}

// startAgain starts an evaluation again under the run's id, keeping the
// sweep's run id and the harness that its previous execution carried
// (prior, as DescribeWorkflowExecution gives them): a sweep's cell started
// on its own is still found by the sweep's filters.
func startAgain(ctx context.Context, c client.Client, taskQueue string, cfg workflows.RunConfig, prior *commonpb.SearchAttributes) (Started, error) {
	attrs := keepAttributes(workflows.SearchAttributes(cfg), prior, workflows.AttrRunID, workflows.AttrHarness)
	return startWith(ctx, c, taskQueue, cfg, "eval", workflows.EvalName, workflows.EvalInput{Config: cfg}, attrs)
}

// keepAttributes is attrs with the keyword attributes names set as prior
// has them; those prior lacks, or cannot be read, are left as attrs has
// them.
func keepAttributes(attrs temporal.SearchAttributes, prior *commonpb.SearchAttributes, names ...string) temporal.SearchAttributes {
	updates := workflows.RunAttributeUpdates(attrs, workflows.AttrRunID, workflows.AttrModel, workflows.AttrTaskset, workflows.AttrHarness)
	for _, name := range names {
		p, ok := prior.GetIndexedFields()[name]
		var v string
		if !ok || converter.GetDefaultDataConverter().FromPayload(p, &v) != nil || v == "" {
			continue
		}
		updates = append(updates, temporal.NewSearchAttributeKeyKeyword(name).ValueSet(v))
	}
	return temporal.NewSearchAttributes(updates...)
}

// StartTrain starts a training run's workflow on taskQueue under the run's id.
func StartTrain(ctx context.Context, c client.Client, taskQueue string, cfg workflows.RunConfig, train workflows.TrainConfig) (Started, error) {
	return start(ctx, c, taskQueue, cfg, "training", workflows.TrainName, workflows.TrainInput{Config: cfg, Train: train})
}

func start(ctx context.Context, c client.Client, taskQueue string, cfg workflows.RunConfig, kind, workflow string, in any) (Started, error) {
	attrs := workflows.SearchAttributes(cfg)
	if sw, ok := in.(workflows.SweepInput); ok {
		attrs = workflows.SweepAttributes(sw)
	}
	return startWith(ctx, c, taskQueue, cfg, kind, workflow, in, attrs)
}

func startWith(ctx context.Context, c client.Client, taskQueue string, cfg workflows.RunConfig, kind, workflow string, in any, attrs temporal.SearchAttributes) (Started, error) {
	opts := client.StartWorkflowOptions{
		ID:                    cfg.RunID,
		TaskQueue:             taskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes: attrs,
		StaticSummary:         staticSummary(kind, cfg),
	}
	if sw, ok := in.(workflows.SweepInput); ok {
		opts.StaticSummary = sweepSummary(sw)
	}
	var s Started
	_, err := c.ExecuteWorkflow(ctx, opts, workflow, in)
	if isMissingSearchAttributes(err) {
		// A namespace set up before the harness attribute: the others.
		opts.TypedSearchAttributes = withoutHarness(opts.TypedSearchAttributes)
		_, err = c.ExecuteWorkflow(ctx, opts, workflow, in)
	}
	if isMissingSearchAttributes(err) {
		s.NoSearchAttributes = true
		opts.TypedSearchAttributes = temporal.SearchAttributes{}
		_, err = c.ExecuteWorkflow(ctx, opts, workflow, in)
	}
	if err != nil {
		return s, fmt.Errorf("start run %s: %w", cfg.RunID, err)
	}
	return s, nil
}

// Attached is what Attach found of a run and what it did.
type Attached struct {
	// Prior is the status of the run's last execution;
	// WORKFLOW_EXECUTION_STATUS_UNSPECIFIED when no run had its id.
	Prior enumspb.WorkflowExecutionStatus
	// Started is the execution Attach started; nil when it started none:
	// the run is running, or has finished and is not rerun.
	Started *Started
	// StartedAt is when the run's last chain of executions started (its
	// first segment, when it continued as new), when there was one.
	StartedAt time.Time
}

// Done reports whether the run had finished and nothing was started: its
// result is the one to report.
func (a Attached) Done() bool {
	return a.Prior == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED && a.Started == nil
}

// withoutHarness is attrs without the harness attribute.
func withoutHarness(attrs temporal.SearchAttributes) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(workflows.RunAttributeUpdates(attrs, workflows.AttrRunID, workflows.AttrModel, workflows.AttrTaskset)...)
}

// Attach starts an evaluation, or attaches to the run with its id: a running
// one is left to run, a finished one is reported (Done) unless it reruns its
// failures (cfg.RetryFailed), and a failed or terminated one is started
// again, reusing the rollouts the store holds.
func Attach(ctx context.Context, c client.Client, taskQueue string, cfg workflows.RunConfig) (Attached, error) {
	return attach(ctx, c, cfg, func(prior *commonpb.SearchAttributes) (Started, error) {
		return startAgain(ctx, c, taskQueue, cfg, prior)
	})
}

// AttachSweep is Attach for a sweep: a sweep started again starts each of
// its cells again, and each cell reuses the rollouts stored under its own
// run id.
func AttachSweep(ctx context.Context, c client.Client, taskQueue string, in workflows.SweepInput) (Attached, error) {
	return attach(ctx, c, in.Config, func(*commonpb.SearchAttributes) (Started, error) { return StartSweep(ctx, c, taskQueue, in) })
}

// StartSweep starts a sweep's workflow on taskQueue under the run's id.
func StartSweep(ctx context.Context, c client.Client, taskQueue string, in workflows.SweepInput) (Started, error) {
	return start(ctx, c, taskQueue, in.Config, "sweep", workflows.SweepName, in)
}

// sweepSummary is the line the Temporal UI shows under a sweep's workflow.
func sweepSummary(in workflows.SweepInput) string {
	return fmt.Sprintf("sweep of %s: %d cells (%s)", workflows.TasksetName(in.Config.Taskset), len(in.Cells), workflows.CellNames(in.Cells))
}

func attach(ctx context.Context, c client.Client, cfg workflows.RunConfig, startRun func(prior *commonpb.SearchAttributes) (Started, error)) (Attached, error) {
	var a Attached
	var prior *commonpb.SearchAttributes
	desc, err := c.DescribeWorkflowExecution(ctx, cfg.RunID, "")
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
	case err != nil:
		return a, fmt.Errorf("look up run %s: %w", cfg.RunID, err)
	default:
		a.Prior = desc.GetWorkflowExecutionInfo().GetStatus()
		prior = desc.GetWorkflowExecutionInfo().GetSearchAttributes()
		a.StartedAt = chainStart(ctx, c, desc.GetWorkflowExecutionInfo())
		if a.Prior == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING ||
			a.Prior == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED && !cfg.RetryFailed {
			return a, nil
		}
		if err := sameTasks(ctx, c, cfg, desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()); err != nil {
			return a, err
		}
	}
	s, err := startRun(prior)
	if err != nil {
		return a, err
	}
	a.Started = &s
	return a, nil
}

// sameTasks refuses to start a run again on a taskset that, under the same
// name, now holds other tasks (a registry dataset resolved to other
// commits): its stored rollouts would mix versions.
func sameTasks(ctx context.Context, c client.Client, cfg workflows.RunConfig, execution string) error {
	old, err := startInput(ctx, c, cfg.RunID, execution)
	if err != nil {
		return err
	}
	was := old.Config
	if was.Taskset != cfg.Taskset && workflows.TasksetName(was.Taskset) == workflows.TasksetName(cfg.Taskset) {
		return &ChangedError{RunID: cfg.RunID, Settings: []string{"taskset"}, Was: was, Now: cfg}
	}
	return nil
}

// staticSummary is the line the Temporal UI shows under a run's workflow:
// what it runs. No secret: the names of the run's taskset and model, never
// the harness's command line.
func staticSummary(kind string, cfg workflows.RunConfig) string {
	tasks := "every task"
	if cfg.Tasks > 0 {
		tasks = fmt.Sprintf("%d tasks", cfg.Tasks)
	}
	return fmt.Sprintf("%s of %s (%s × %d) with model %s", kind, workflows.TasksetName(cfg.Taskset), tasks, max(cfg.RolloutsPerTask, 1), cfg.Model)
}

// isMissingSearchAttributes tells a start refused because the namespace
// lacks evalflow's search attributes (a cluster set up without them).
func isMissingSearchAttributes(err error) bool {
	var invalid *serviceerror.InvalidArgument
	return errors.As(err, &invalid) && strings.Contains(strings.ToLower(invalid.Error()), "search attribute")
}

// FailedResult returns the result an evaluation that ended past its
// failure limit (RunConfig.MaxFailures) carries in its error.
func FailedResult(err error) (workflows.Result, bool) {
	var appErr *temporal.ApplicationError
	var res workflows.Result
	if !errors.As(err, &appErr) || appErr.Type() != workflows.ErrRunFailed || appErr.Details(&res) != nil {
		return workflows.Result{}, false
	}
	return res, true
}

// chainStart is when the chain of executions info belongs to started: its
// first run's start, the run having continued as new since (a segment of
// a long run); info's own start when that run cannot be read.
func chainStart(ctx context.Context, c client.Client, info *workflowpb.WorkflowExecutionInfo) time.Time {
	first := info.GetFirstRunId()
	if first == "" || first == info.GetExecution().GetRunId() {
		return info.GetStartTime().AsTime()
	}
	desc, err := c.DescribeWorkflowExecution(ctx, info.GetExecution().GetWorkflowId(), first)
	if err != nil {
		return info.GetStartTime().AsTime()
	}
	return desc.GetWorkflowExecutionInfo().GetStartTime().AsTime()
}
