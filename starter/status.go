package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v2"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/workflows"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "print a run's live progress",
		ArgsUsage: "<run-id>",
		Flags:     []cli.Flag{addressFlag, namespaceFlag, runsDirFlag},
		Action: func(cctx *cli.Context) error {
			runID, err := runArg(cctx)
			if err != nil {
				return err
			}
			s, err := connect(cctx, connectOptions{})
			if err != nil {
				// No server: say what the store holds.
				store, serr := results.Open(cctx.String(runsDirFlag.Name))
				if serr != nil {
					return err
				}
				recs, lerr := store.List(cctx.Context, runID)
				if lerr != nil || len(recs) == 0 {
					return err
				}
				fmt.Printf("run %s: %d rollouts recorded in %s; no Temporal server answers at %s for live progress\n",
					runID, len(recs), store.Dir(runID), cctx.String(addressFlag.Name))
				return nil
			}
			defer s.Close()
			desc, err := s.client.DescribeWorkflowExecution(cctx.Context, runID, "")
			if err != nil {
				return fmt.Errorf("run %s: %w", runID, err)
			}
			status := desc.WorkflowExecutionInfo.Status
			fmt.Printf("run %s: %s\n", runID, statusWord(status))
			progressID := runID
			if desc.WorkflowExecutionInfo.GetType().GetName() == workflows.TrainName {
				if v, err := s.client.QueryWorkflow(cctx.Context, runID, "", workflows.QueryProgress); err == nil {
					var tp workflows.TrainProgress
					if v.Get(&tp) == nil {
						fmt.Printf("epoch %d of %s; skipped %v\n", tp.Epoch, epochsText(tp.Epochs), tp.Skipped)
						progressID = workflows.EpochID(runID, tp.Epoch)
					}
				}
			}
			p, err := queryProgress(cctx.Context, s.client, progressID)
			if err != nil {
				if status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
					fmt.Fprintf(os.Stderr, "progress unavailable (is a worker running?): %v\n", err)
				}
				return nil
			}
			fmt.Println(renderProgress(p, time.Since(p.StartedAt), p.Done))
			return nil
		},
	}
}

func resultsCommand() *cli.Command {
	return &cli.Command{
		Name:      "results",
		Usage:     "print the summary of a finished run",
		ArgsUsage: "<run-id>",
		Flags:     []cli.Flag{addressFlag, namespaceFlag, runsDirFlag},
		Action: func(cctx *cli.Context) error {
			runID, err := runArg(cctx)
			if err != nil {
				return err
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

// runArg is the command's <run-id> argument.
func runArg(cctx *cli.Context) (string, error) {
	runID := cctx.Args().First()
	if runID == "" {
		return "", errNoRunID
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
