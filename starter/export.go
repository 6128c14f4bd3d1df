package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/export"
	"github.com/evalflow/evalflow/run"
	"github.com/evalflow/evalflow/trajectory"
)

func exportCommand() *cli.Command {
	return &cli.Command{
		Name:      "export",
		Usage:     "write a run's rollouts as one flat file, a row per rollout (JSON Lines or Parquet), for pandas or datasets; or as ATIF trajectories or a fine-tuning dataset",
		ArgsUsage: "<run-id>",
		Flags: append(readerFlags(),
			&cli.StringFlag{Name: "format", Value: "jsonl", Usage: "jsonl or parquet: a row per rollout; " +
				"atif: each rollout's trajectory in Harbor's ATIF, <out>/<key, / as ~>/trajectory.json, or one a line when --out ends in .jsonl; " +
				"sft: a chat-messages dataset for fine-tuning, JSON Lines, each rollout's final conversation"},
			&cli.StringFlag{Name: "out", Usage: "file to write (default: <run-id>.<format>, for atif the directory <run-id>-atif, for sft <run-id>.sft.jsonl; - for stdout)"},
			&cli.StringFlag{Name: "samples", Usage: "write training samples instead, a row per sample: interleaved or steps (runs with --trace-tokens)"},
			&cli.BoolFlag{Name: "passed", Usage: "sft: only rollouts that passed: succeeded with a reward of at least 1 (the default pass threshold), or of --min-reward"},
			&cli.Float64Flag{Name: "min-reward", Usage: "sft: only rollouts with a reward of at least this"},
		),
		Before: takesArgs(1),
		Action: func(cctx *cli.Context) error {
			runID, err := runArg(cctx)
			if err != nil {
				return err
			}
			format := strings.ToLower(cctx.String("format"))
			if err := checkExportFlags(cctx, format); err != nil {
				return err
			}
			if format == formatATIF || format == formatSFT {
				return exportTrainingData(cctx, runID, format)
			}
			view := cctx.String("samples")
			if cctx.IsSet("samples") {
				if _, err := (trajectory.Trajectory{}).Samples(view); err != nil || view == "" {
					return fmt.Errorf("--samples %q: want %s or %s", view, trajectory.ViewInterleaved, trajectory.ViewSteps)
				}
			}
			store, err := openStore(cctx.Context, storeFlags(cctx))
			if err != nil {
				return err
			}
			defer store.Close()
			if view != "" {
				rows, err := export.Samples(cctx.Context, store, runID, view)
				if err != nil {
					return err
				}
				if len(rows) == 0 {
					return fmt.Errorf("run %s has no training samples in %s: its rollouts have no token data (run with --trace-tokens)", runID, storeFlags(cctx))
				}
				return writeRows(cctx.String("out"), runID, format, "training samples", rows)
			}
			rows, err := exportRows(cctx.Context, store, runID)
			if err != nil {
				return err
			}
			if len(rows) == 0 {
				return fmt.Errorf("run %s has no rollouts in %s", runID, storeFlags(cctx))
			}
			return writeRows(cctx.String("out"), runID, format, "rollouts", rows)
		},
	}
}

// exportRows are a run's rollouts; a sweep's are its cells', cell by cell,
// each row naming its cell, so that the cells compare side by side.
func exportRows(ctx context.Context, store results.Store, runID string) ([]export.Row, error) {
	sum, err := run.ReadSummary(ctx, store, runID)
	if err != nil || sum.Sweep == nil {
		return export.Rows(ctx, store, runID)
	}
	var rows []export.Row
	for _, c := range sum.Sweep.Cells {
		cell, err := export.Rows(ctx, store, c.RunID)
		if err != nil {
			return nil, fmt.Errorf("cell %s: %w", c.Name, err)
		}
		for i := range cell {
			cell[i].Cell = c.Name
		}
		rows = append(rows, cell...)
	}
	return rows, nil
}

// writeRows writes rows to out (default <run-id>.<format>; - for stdout)
// and says so on stderr.
func writeRows[R export.Row | export.SampleRow](out, runID, format, what string, rows []R) error {
	if out == "" {
		out = runID + "." + format
	}
	if out == "-" {
		return export.Write(os.Stdout, format, rows)
	}
	if err := writeOutput(out, func(w io.Writer) error { return export.Write(w, format, rows) }); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%d %s of %s written to %s\n", len(rows), what, runID, out)
	return nil
}

// writeOutput writes a file through write, removing it if write fails.
func writeOutput(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// storedRollout is one line of `starter results --rollouts`: a record with
// the trace of the attempt that made it, or with every attempt's, and
// that attempt's artifacts by path and size (artifacts.go).
type storedRollout struct {
	results.Record
	ArtifactCount int               `json:"artifact_count"`
	ArtifactFiles []artifactFile    `json:"artifact_files,omitempty"`
	TraceBody     *json.RawMessage  `json:"trace_body,omitempty"`
	Attempts      []results.Attempt `json:"attempts,omitempty"`
}

// printRollouts writes every rollout of a run, a JSON object a line, with
// its trace (all its attempts with attempts set), read from the store.
func printRollouts(cctx *cli.Context, w io.Writer, runID string, attempts bool) error {
	ctx := cctx.Context
	sc := storeFlags(cctx)
	store, err := openStore(ctx, sc)
	if err != nil {
		return err
	}
	defer store.Close()
	recs, err := store.List(ctx, runID)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return fmt.Errorf("run %s has no rollouts in %s (pick its store with %s)", runID, sc, storeHint(sc))
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for _, rec := range recs {
		line := storedRollout{Record: rec}
		if attempts {
			if line.Attempts, err = store.Attempts(ctx, runID, rec.Key); err != nil {
				return err
			}
			line.listArtifacts(recordAttempt(line.Attempts, rec.Attempt))
		} else if rec.Trace != "" {
			tr, err := store.Trace(ctx, runID, rec.Key)
			if err != nil {
				return err
			}
			line.listArtifacts(tr)
			b, err := json.Marshal(tr)
			if err != nil {
				return err
			}
			raw := json.RawMessage(b)
			line.TraceBody = &raw
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}
