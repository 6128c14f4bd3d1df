package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/run"
	"github.com/evalflow/evalflow/workflows"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "print a run's live progress, or what the run store holds when Temporal does not know the run",
		ArgsUsage: "<run-id>",
		Flags:     readerFlags(),
		Before:    takesArgs(1),
		Action: func(cctx *cli.Context) error {
			runID, err := runArg(cctx)
			if err != nil {
				return err
			}
			server := fmt.Sprintf("the Temporal server at %s, namespace %s",
				cctx.String(wiring.FlagAddress), cctx.String(wiring.FlagNamespace))
			var c client.Client
			if s, err := connect(cctx, connectOptions{}); err == nil {
				defer s.Close()
				c = s.client
			}
			return printStatus(cctx.Context, os.Stdout, c, server, storeFlags(cctx), runID)
		},
	}
}

// printStatus prints a run's live progress from Temporal (c, which is nil
// when no server answers), saying which server it asked. When that server
// does not know the run, it prints what the run store holds instead: the
// default address may well be another run's embedded server.
func printStatus(ctx context.Context, w io.Writer, c client.Client, server string, sc wiring.StoreConfig, runID string) error {
	if c == nil {
		fmt.Fprintf(w, "run %s: no answer from %s\n", runID, server)
		return printStoreStatus(ctx, w, sc, runID, server)
	}
	live, err := run.Status(ctx, c, runID)
	if errors.Is(err, run.ErrNotFound) {
		fmt.Fprintf(w, "run %s: not on %s\n", runID, server)
		return printStoreStatus(ctx, w, sc, runID, server)
	}
	if err != nil {
		return fmt.Errorf("run %s on %s: %w", runID, server, err)
	}
	fmt.Fprintf(w, "run %s: %s (on %s)\n", runID, statusWord(live.Status), server)
	if tp := live.Train; tp != nil {
		fmt.Fprintln(w, trainLine(live.Status, *tp))
	}
	if p := live.Progress; p != nil {
		fmt.Fprintln(w, renderProgress(*p, time.Since(p.StartedAt), p.Done))
	} else if live.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		fmt.Fprintf(os.Stderr, "progress unavailable (is a worker running?): %v\n", live.ProgressErr)
	}
	return nil
}

// printStoreStatus prints what the run store holds for a run: its rollouts,
// how many succeeded and failed, and their mean reward.
func printStoreStatus(ctx context.Context, w io.Writer, sc wiring.StoreConfig, runID, server string) error {
	store, err := openStore(ctx, sc)
	if err != nil {
		return err
	}
	defer store.Close()
	stored, err := run.Load(ctx, store, runID)
	if err != nil && !errors.Is(err, run.ErrNotFound) {
		return fmt.Errorf("run %s: %w", runID, err)
	}
	if len(stored.Records) == 0 {
		return fmt.Errorf("run %s is neither on %s nor in the run store %s (pick the run's server with --address, its store with %s)", runID, server, sc, storeHint(sc))
	}
	n := run.Count(stored.Records)
	fmt.Fprintf(w, "run store %s: %d rollouts (%d ok, %d failed), %s",
		runLocation(sc, runID), n.Rollouts, n.OK, n.Failed, meanLine(n.MeanReward, n.Rollouts-n.Refused, n.Refused))
	if n.Epochs > 1 {
		fmt.Fprintf(w, " over %d epochs", n.Epochs)
	}
	fmt.Fprintln(w)
	if stored.Summary != nil {
		fmt.Fprintf(w, "The run finished: `starter results %s` prints its summary.\n", runID)
	}
	return nil
}

func resultsCommand() *cli.Command {
	return &cli.Command{
		Name:      "results",
		Usage:     "print the summary of a finished run, or with --rollouts its rollouts and their traces",
		ArgsUsage: "<run-id>",
		Flags: append(readerFlags(),
			&cli.BoolFlag{Name: "rollouts", Usage: "print every rollout's record with its trace, a JSON object a line, from the run store"},
			&cli.BoolFlag{Name: "attempts", Usage: "with --rollouts: every attempt's trace (attempts), not only the record's (trace_body)"},
			&cli.StringFlag{Name: "exclude-flagged", Usage: "an audit's run id (starter audit): score the run without the tasks it flagged"},
		),
		Before: takesArgs(1),
		Action: func(cctx *cli.Context) error {
			runID, err := runArg(cctx)
			if err != nil {
				return err
			}
			if cctx.Bool("rollouts") || cctx.Bool("attempts") {
				return printRollouts(cctx, os.Stdout, runID, cctx.Bool("attempts"))
			}
			if auditID := cctx.String("exclude-flagged"); auditID != "" {
				return printExcluded(cctx.Context, os.Stdout, storeFlags(cctx), runID, auditID)
			}
			// The run store answers without a server; dial only without it.
			if printStored(cctx, runID) {
				return nil
			}
			s, err := connect(cctx, connectOptions{})
			if err != nil {
				return printResult(cctx.Context, nil, cctx, runID)
			}
			defer s.Close()
			ctx, cancel := context.WithTimeout(cctx.Context, 10*time.Second)
			defer cancel()
			return printResult(ctx, s.client, cctx, runID)
		},
	}
}

// runArg is the command's <run-id> argument, checked as the run store
// checks it.
func runArg(cctx *cli.Context) (string, error) {
	runID := cctx.Args().First()
	if runID == "" {
		return "", errNoRunID
	}
	if err := results.ValidateRunID(runID); err != nil {
		return "", err
	}
	return runID, nil
}

func statusWord(s enumspb.WorkflowExecutionStatus) string {
	switch s {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return "running"
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return "finished"
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "failed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "terminated"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "canceled"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed out"
	}
	return s.String()
}

// trainLine is a training run's epochs as status prints them: the epoch
// running (numbered from 0), all of them once the run has completed, where
// it stopped otherwise, and the epochs it took from the run store (a
// resumed run's) when there are any.
func trainLine(status enumspb.WorkflowExecutionStatus, tp workflows.TrainProgress) string {
	var line string
	switch status {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		line = fmt.Sprintf("epoch %d of %s", tp.Epoch, epochsText(tp.Epochs))
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		line = fmt.Sprintf("finished: %d of %s", tp.Epoch, epochsText(tp.Epochs))
	default:
		line = fmt.Sprintf("stopped in epoch %d of %s", tp.Epoch, epochsText(tp.Epochs))
	}
	if len(tp.Skipped) > 0 {
		epochs := make([]string, len(tp.Skipped))
		for i, e := range tp.Skipped {
			epochs[i] = strconv.Itoa(e)
		}
		line += "; epochs " + strings.Join(epochs, ", ") + " reused from the run store"
	}
	return line
}
