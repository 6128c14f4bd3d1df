package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/export"
	"github.com/evalflow/evalflow/results/export/atif"
	"github.com/evalflow/evalflow/results/export/sft"
	"github.com/evalflow/evalflow/run"
)

// The export formats a trainer reads, beside the flat table's.
const (
	formatATIF = "atif"
	formatSFT  = "sft"
)

// checkExportFlags refuses a format export does not write, and flags that
// do not go with the format.
func checkExportFlags(cctx *cli.Context, format string) error {
	switch format {
	case "jsonl", "parquet":
		for _, name := range []string{"passed", "min-reward"} {
			if cctx.IsSet(name) {
				return fmt.Errorf("--%s goes with --format %s", name, formatSFT)
			}
		}
	case formatATIF, formatSFT:
		if cctx.IsSet("samples") {
			return fmt.Errorf("--samples goes with --format jsonl or parquet, not %s", format)
		}
		if format == formatATIF && (cctx.IsSet("passed") || cctx.IsSet("min-reward")) {
			return fmt.Errorf("--passed and --min-reward go with --format %s", formatSFT)
		}
	default:
		return fmt.Errorf("--format %q: want %s, %s or %s", format, strings.Join(export.Formats, ", "), formatATIF, formatSFT)
	}
	return nil
}

// exportTrainingData writes a run (a sweep: every cell's) as ATIF
// trajectories or as an SFT dataset.
func exportTrainingData(cctx *cli.Context, runID, format string) error {
	ctx := cctx.Context
	store, err := openStore(ctx, storeFlags(cctx))
	if err != nil {
		return err
	}
	defer store.Close()
	runs := exportRunIDs(ctx, store, runID)
	out := cctx.String("out")
	if format == formatATIF {
		return exportATIF(ctx, store, runs, out)
	}
	var f sft.Filter
	f.Passed = cctx.Bool("passed")
	if cctx.IsSet("min-reward") {
		least := cctx.Float64("min-reward")
		f.MinReward = &least
	}
	return exportSFT(ctx, store, runs, out, f)
}

// exportRunIDs are the runs an export of runID covers: a sweep's cells,
// else the run itself.
func exportRunIDs(ctx context.Context, store results.Store, runID string) []string {
	sum, err := run.ReadSummary(ctx, store, runID)
	if err != nil || sum.Sweep == nil {
		return []string{runID}
	}
	ids := make([]string, 0, len(sum.Sweep.Cells))
	for _, c := range sum.Sweep.Cells {
		ids = append(ids, c.RunID)
	}
	return ids
}

// exportATIF writes the runs' trajectories to the directory out (default
// <run-id>-atif), or one a line to out when it ends in .jsonl or is -.
func exportATIF(ctx context.Context, store results.Store, runs []string, out string) error {
	agent := atif.Agent{Name: "evalflow", Version: wiring.Version()}
	n, skipped := 0, 0
	each := func(put func(atif.Trajectory) error) error {
		for _, id := range runs {
			s, err := atif.Each(ctx, store, id, agent, func(t atif.Trajectory) error { n++; return put(t) })
			skipped += s
			if err != nil {
				return err
			}
		}
		if n == 0 {
			return fmt.Errorf("run %s has no rollout with a traced model call (%d without) in %s", runs[0], skipped, store.Where(runs[0]))
		}
		return nil
	}
	if out == "" {
		out = runs[0] + "-atif"
	}
	var err error
	switch {
	case out == "-":
		return each(jsonLines[atif.Trajectory](os.Stdout))
	case strings.HasSuffix(out, ".jsonl"):
		err = writeOutput(out, func(w io.Writer) error { return each(jsonLines[atif.Trajectory](w)) })
	default:
		err = each(func(t atif.Trajectory) error { return atif.WriteFile(out, t) })
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%d ATIF trajectories written to %s (%d rollouts without a traced model call left out)\n", n, out, skipped)
	return nil
}

// exportSFT writes the final conversations of the runs' rollouts that f
// keeps to out (default <run-id>.sft.jsonl; - for stdout).
func exportSFT(ctx context.Context, store results.Store, runs []string, out string, f sft.Filter) error {
	n := 0
	write := func(w io.Writer) error {
		put := jsonLines[sft.Conversation](w)
		for _, id := range runs {
			if err := sft.Each(ctx, store, id, f, func(c sft.Conversation) error { n++; return put(c) }); err != nil {
				return err
			}
		}
		if n == 0 {
			return fmt.Errorf("run %s has no rollout with an answered model call that the filter keeps in %s", runs[0], store.Where(runs[0]))
		}
		return nil
	}
	if out == "" {
		out = runs[0] + ".sft.jsonl"
	}
	if out == "-" {
		return write(os.Stdout)
	}
	if err := writeOutput(out, write); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%d conversations written to %s\n", n, out)
	return nil
}

// jsonLines writes values to w, one JSON object a line.
func jsonLines[T any](w io.Writer) func(T) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return func(v T) error { return enc.Encode(v) }
}
