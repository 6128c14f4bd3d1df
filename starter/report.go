package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/run"
	"github.com/evalflow/evalflow/workflows"
)

// printSummary writes a finished run's summary table.
func printSummary(w io.Writer, r workflows.Result, sc wiring.StoreConfig) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "run\t%s\n", r.RunID)
	fmt.Fprintf(tw, "taskset\t%s\n", workflows.TasksetName(r.Taskset))
	fmt.Fprintf(tw, "model\t%s\n", r.Model)
	fmt.Fprintf(tw, "tasks\t%d\n", r.Tasks)
	var notes []string
	if r.Reused > 0 {
		notes = append(notes, fmt.Sprintf("%d reused from an earlier attempt", r.Reused))
	}
	if r.Rerun > 0 {
		notes = append(notes, fmt.Sprintf("%d earlier failures run again", r.Rerun))
	}
	reused := ""
	if len(notes) > 0 {
		reused = " (" + strings.Join(notes, ", ") + ")"
	}
	fmt.Fprintf(tw, "rollouts\t%d%s\n", r.Rollouts, reused)
	if scored := r.Rollouts - r.Refused; scored > 0 {
		fmt.Fprintf(tw, "mean reward\t%.3f ± %.3f%s\n", r.MeanReward, r.StdReward, refusedNote(r.Refused))
	} else {
		fmt.Fprintf(tw, "mean reward\tnone: no rollout was scored%s\n", refusedNote(r.Refused))
	}
	for _, p := range r.PassAtK {
		fmt.Fprintf(tw, "pass@%d\t%.3f\n", p.K, p.Value)
	}
	var kinds []string
	for _, e := range r.Errors {
		kinds = append(kinds, fmt.Sprintf("%s %d", e.Kind, e.Count))
	}
	errs := fmt.Sprint(r.Failed)
	if len(kinds) > 0 {
		errs += " (" + strings.Join(kinds, ", ") + ")"
	}
	fmt.Fprintf(tw, "errors\t%s\n", errs)
	for _, f := range r.FailedSamples {
		fmt.Fprintf(tw, "  %s\t%s: %s\n", f.Key, f.Kind, f.Error)
	}
	fmt.Fprintf(tw, "tokens\t%d in, %d out\n", r.InputTokens, r.OutputTokens)
	fmt.Fprintf(tw, "cost\t%s\n", costLine(r))
	if r.Stopped == workflows.StoppedMaxRunCost {
		fmt.Fprintf(tw, "stopped\tat --max-run-cost: no rollout started once the stored ones cost it, those running finished (resume with a higher --max-run-cost to go on)\n")
	}
	fmt.Fprintf(tw, "rollout time\t%dms mean, %dms max\n", r.MeanRolloutMS, r.MaxRolloutMS)
	fmt.Fprintf(tw, "wall time\t%s\n", r.WallTime)
	fmt.Fprintf(tw, "results\t%s\n", runLocation(sc, r.RunID))
	tw.Flush()
}

// refusedNote says that a mean leaves out the rollouts of tasks refused
// as configured; "" when there are none.
func refusedNote(refused int64) string {
	if refused == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d rollouts of tasks that cannot run as configured left out: errors below)", refused)
}

// meanLine is a mean reward over scored rollouts as a status line says
// it, or that none was scored.
func meanLine(mean float64, scored, refused int) string {
	if scored <= 0 {
		return "no rollout scored" + refusedNote(int64(refused))
	}
	return fmt.Sprintf("mean reward %.3f%s", mean, refusedNote(int64(refused)))
}

// costLine is a run's cost as the summary says it: what the priced calls
// cost, and how many rollouts had a model without a price.
func costLine(r workflows.Result) string {
	line := fmt.Sprintf("$%.4f", r.CostUSD)
	if r.UnpricedRollouts > 0 {
		line += fmt.Sprintf(" (and unknown for %d rollouts: a call of a model without a price, add it with --prices, or an answer without usage)", r.UnpricedRollouts)
	}
	return line
}

// printResult prints a run's summary from the run store, or from Temporal
// when the store does not have it. Evaluations and training runs each get
// their own table.
func printResult(ctx context.Context, c client.Client, cctx *cli.Context, runID string) error {
	sc := storeFlags(cctx)
	if printStored(cctx, runID) {
		return nil
	}
	if c == nil {
		return fmt.Errorf("run %s has no summary in %s and no Temporal server answers", runID, runLocation(sc, runID))
	}
	var sum run.Summary
	if err := c.GetWorkflow(ctx, runID, "").Get(ctx, &sum); err != nil {
		return fmt.Errorf("run %s: %w", runID, err)
	}
	printRun(sum, sc)
	return nil
}

// printStored prints a run's summary from the run store, if it holds one.
func printStored(cctx *cli.Context, runID string) bool {
	sc := storeFlags(cctx)
	store, err := openStore(cctx.Context, sc)
	if err != nil {
		return false
	}
	defer store.Close()
	sum, err := run.ReadSummary(cctx.Context, store, runID)
	if err != nil {
		return false
	}
	printRun(sum, sc)
	return true
}

// printRun prints an eval's or a training run's summary, each its own table.
func printRun(sum run.Summary, sc wiring.StoreConfig) {
	switch {
	case sum.Train != nil:
		printTrainSummary(os.Stdout, *sum.Train, sc)
	case sum.Sweep != nil:
		printSweepSummary(os.Stdout, *sum.Sweep, sc)
	case sum.Eval != nil:
		printSummary(os.Stdout, *sum.Eval, sc)
	}
}

var errNoRunID = errors.New("give a run id")
