package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/evalflow/evalflow/rollout"
)

// SweepName is the registered name of the Sweep workflow.
const SweepName = "SweepWorkflow"

// SweepInput starts or resumes a sweep: one evaluation per cell of a
// harness × model matrix, over the same tasks in the same order.
type SweepInput struct {
	// Config is the run's: its id, taskset, seed and limits. Each cell
	// runs it with its own run id, harness and model.
	Config RunConfig   `json:"config"`
	Cells  []SweepCell `json:"cells"`
}

// SweepCell is one harness and one model of a sweep.
type SweepCell struct {
	// Name names the cell (harness@model, see CellName); the cell's
	// evaluation runs under CellRunID(run id, Name).
	Name string `json:"name"`
	// HarnessName is the harness as people name it: the built-in agent,
	// a packaged harness, oracle, or a command's first words.
	HarnessName string                `json:"harness_name"`
	Harness     rollout.HarnessConfig `json:"harness"`
	Model       string                `json:"model"`
}

// SweepResult is a finished sweep's summary: each cell's result, in the
// order of its cells.
type SweepResult struct {
	RunID    string       `json:"run_id"`
	Taskset  string       `json:"taskset"`
	Cells    []CellResult `json:"cells"`
	WallTime string       `json:"wall_time"`
}

// CellResult is one cell's evaluation: its Result, or why it failed.
type CellResult struct {
	Name        string `json:"name"`
	RunID       string `json:"run_id"`
	HarnessName string `json:"harness_name"`
	Model       string `json:"model"`
	Result      Result `json:"result"`
	// Error is why the cell's evaluation failed; its Result is empty
	// unless it failed past --max-failures (then Result holds its figures).
	Error string `json:"error,omitempty"`
}

// CellRunID is the run id of a sweep's cell: the sweep's id and the cell's
// name. It is the cell's workflow id and the prefix of its rollout keys,
// so cells never share a key.
func CellRunID(runID, cell string) string { return runID + ":" + cell }

// SweepAttributes are the search attributes of a sweep's workflow: its run
// id and taskset, its models and harnesses, each list comma-separated.
func SweepAttributes(in SweepInput) temporal.SearchAttributes {
	var models, harnesses []string
	for _, c := range in.Cells {
		if !slices.Contains(models, c.Model) {
			models = append(models, c.Model)
		}
		if !slices.Contains(harnesses, c.HarnessName) {
			harnesses = append(harnesses, c.HarnessName)
		}
	}
	return temporal.NewSearchAttributes(
		temporal.NewSearchAttributeKeyKeyword(AttrRunID).ValueSet(in.Config.RunID),
		temporal.NewSearchAttributeKeyKeyword(AttrModel).ValueSet(strings.Join(models, ",")),
		temporal.NewSearchAttributeKeyKeyword(AttrTaskset).ValueSet(TasksetName(in.Config.Taskset)),
		temporal.NewSearchAttributeKeyKeyword(AttrHarness).ValueSet(strings.Join(harnesses, ",")),
	)
}

// CellNames lists cells' names, comma-separated.
func CellNames(cells []SweepCell) string {
	names := make([]string, len(cells))
	for i, c := range cells {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

// cellAttributes are the search attributes of a cell's workflow: the
// sweep's run id (one filter finds every cell), the cell's model, taskset
// and harness. Only those the sweep itself carries are set, so a namespace
// lacking them starts the cells without them.
func cellAttributes(have temporal.SearchAttributes, cell SweepCell) temporal.SearchAttributes {
	var updates []temporal.SearchAttributeUpdate
	for _, a := range []struct{ name, value string }{
		{AttrRunID, ""}, {AttrTaskset, ""}, {AttrModel, cell.Model}, {AttrHarness, cell.HarnessName},
	} {
		key := temporal.NewSearchAttributeKeyKeyword(a.name)
		v, ok := have.GetKeyword(key)
		if !ok {
			continue
		}
		if a.value != "" {
			v = a.value
		}
		updates = append(updates, key.ValueSet(v))
	}
	return temporal.NewSearchAttributes(updates...)
}

// Sweep runs one child Eval per cell, all at once, and waits for every
// one. A cell that fails does not stop the others; its error is in its
// CellResult. Started again under the same run id, each cell's evaluation
// reuses the rollouts the store holds under its own run id.
func Sweep(ctx workflow.Context, in SweepInput) (SweepResult, error) {
	cfg := in.Config.WithDefaults()
	if err := validateSweep(cfg, in.Cells); err != nil {
		return SweepResult{}, configError(err)
	}
	started := workflow.Now(ctx)
	have := workflow.GetTypedSearchAttributes(ctx)
	futures := make([]workflow.Future, len(in.Cells))
	for i, cell := range in.Cells {
		futures[i] = startCell(ctx, cfg, cell, have)
	}
	res := SweepResult{RunID: cfg.RunID, Taskset: cfg.Taskset}
	for i, cell := range in.Cells {
		cr := CellResult{Name: cell.Name, RunID: CellRunID(cfg.RunID, cell.Name), HarnessName: cell.HarnessName, Model: cell.Model}
		if err := futures[i].Get(ctx, &cr.Result); err != nil {
			cr.Error = err.Error()
			var appErr *temporal.ApplicationError
			if errors.As(err, &appErr) && appErr.Type() == ErrRunFailed {
				_ = appErr.Details(&cr.Result)
			}
		}
		res.Cells = append(res.Cells, cr)
	}
	res.WallTime = workflow.Now(ctx).Sub(started).Round(time.Millisecond).String()
	finishCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	if err := workflow.ExecuteActivity(finishCtx, rollout.ActivityFinish, rollout.FinishInput{RunID: cfg.RunID, Summary: res}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("could not write the sweep summary", "error", err)
	}
	return res, nil
}

// startCell starts a cell's evaluation under its own id. A sweep that was
// terminated and resumed at once may find a cell of the run it replaces
// still running: the server terminates children of a closed parent shortly
// after, so the start is tried again until that cell has ended.
func startCell(ctx workflow.Context, cfg RunConfig, cell SweepCell, have temporal.SearchAttributes) workflow.Future {
	c := cfg
	c.RunID = CellRunID(cfg.RunID, cell.Name)
	c.Model = cell.Model
	c.Harness = cell.Harness
	childCtx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            c.RunID,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes: cellAttributes(have, cell),
		StaticSummary:         fmt.Sprintf("cell %s of sweep %s", cell.Name, cfg.RunID),
	})
	f, set := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for try := 1; ; try++ {
			var r Result
			err := workflow.ExecuteChildWorkflow(childCtx, EvalName, EvalInput{Config: c}).Get(ctx, &r)
			var already *temporal.ChildWorkflowExecutionAlreadyStartedError
			if !errors.As(err, &already) || try == epochRestartTries {
				set.Set(r, err)
				return
			}
			workflow.GetLogger(ctx).Info("a cell of the replaced sweep is still ending; waiting to start it again", "cell", cell.Name)
			if err := workflow.Sleep(ctx, epochRestartWait); err != nil {
				set.Set(r, err)
				return
			}
		}
	})
	return f
}

// validateSweep reports the first thing wrong with a sweep's cells.
func validateSweep(cfg RunConfig, cells []SweepCell) error {
	if len(cells) == 0 {
		return fmt.Errorf("a sweep has no cells: give --harness and --model lists")
	}
	seen := map[string]bool{}
	for _, c := range cells {
		if c.Name == "" || c.Model == "" {
			return fmt.Errorf("a cell of the sweep has no name or no model")
		}
		if seen[c.Name] {
			return fmt.Errorf("two cells of the sweep are named %q", c.Name)
		}
		seen[c.Name] = true
	}
	return cfg.Validate()
}
