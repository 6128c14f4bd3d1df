package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/wiring"
	"github.com/evalflow/evalflow/workflows"
)

// printSummary writes a finished run's summary table.
func printSummary(w io.Writer, r workflows.Result, sc wiring.StoreConfig) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "run\t%s\n", r.RunID)
	fmt.Fprintf(tw, "taskset\t%s\n", r.Taskset)
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
	fmt.Fprintf(tw, "mean reward\t%.3f ± %.3f\n", r.MeanReward, r.StdReward)
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
	fmt.Fprintf(tw, "rollout time\t%dms mean, %dms max\n", r.MeanRolloutMS, r.MaxRolloutMS)
	fmt.Fprintf(tw, "wall time\t%s\n", r.WallTime)
	fmt.Fprintf(tw, "results\t%s\n", runLocation(sc, r.RunID))
	tw.Flush()
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
	var raw json.RawMessage
	if err := c.GetWorkflow(ctx, runID, "").Get(ctx, &raw); err != nil {
		return fmt.Errorf("run %s: %w", runID, err)
	}
	return printRaw(raw, sc)
}

// printStored prints a run's summary from the run store, if it holds one.
func printStored(cctx *cli.Context, runID string) bool {
	sc := storeFlags(cctx)
	store, err := openStore(cctx.Context, sc)
	if err != nil {
		return false
	}
	defer store.Close()
	var raw json.RawMessage
	if err := store.ReadSummary(cctx.Context, runID, &raw); err != nil {
		return false
	}
	return printRaw(raw, sc) == nil
}

// printRaw prints an eval's Result or a training run's TrainResult.
func printRaw(raw json.RawMessage, sc wiring.StoreConfig) error {
	var probe struct {
		Epochs json.RawMessage `json:"epochs"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return fmt.Errorf("decode run summary: %w", err)
	}
	if probe.Epochs != nil {
		var r workflows.TrainResult
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("decode run summary: %w", err)
		}
		printTrainSummary(os.Stdout, r, sc)
		return nil
	}
	var r workflows.Result
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("decode run summary: %w", err)
	}
	printSummary(os.Stdout, r, sc)
	return nil
}

var errNoRunID = errors.New("give a run id")
