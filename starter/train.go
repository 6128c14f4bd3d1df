package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/pull"
	"github.com/evalflow/evalflow/run"
	"github.com/evalflow/evalflow/workflows"
)

func trainFlags() []cli.Flag {
	return append(append(runFlags(),
		&cli.IntFlag{Name: "epochs", Value: 1, Usage: "epochs over the taskset; 0 runs until stopped"},
		&cli.IntFlag{Name: "group-size", Value: 4, Usage: "rollouts per task, scored together as a group"},
		&cli.Float64Flag{Name: "max-failures", Usage: "fail an epoch with more failed rollouts than this: a count (>= 1) or a fraction (< 1); 0: no limit"},
		&cli.BoolFlag{Name: "pull", Usage: "start a pull run for trainers (package pull) instead of running epochs"},
	), wiring.WorkerFlags()...)
}

// trainConfig maps the training flags onto a training run's settings.
func trainConfig(cctx *cli.Context) (workflows.TrainConfig, error) {
	t := workflows.TrainConfig{Epochs: cctx.Int("epochs"), MaxFailures: cctx.Float64("max-failures")}
	return t, flagError(cctx, t.Validate())
}

func trainCommand() *cli.Command {
	return &cli.Command{
		Name:      "train",
		Usage:     "generate scored rollouts epoch after epoch for RL training",
		ArgsUsage: " ",
		Flags: append(trainFlags(),
			&cli.StringFlag{Name: "pull-addr", EnvVars: []string{"EVALFLOW_PULL_ADDR"},
				Usage: "with --pull: also serve the pull API over HTTP on this address (e.g. " + defaultPullAddr + "; token from EVALFLOW_PULL_TOKEN)"},
			pullTokenFlag, pullTimeoutFlag),
		Before: prepareRun(0),
		Action: func(cctx *cli.Context) error {
			cfg, err := runConfig(cctx)
			if err != nil {
				return err
			}
			pullAddr := strings.TrimSpace(cctx.String("pull-addr"))
			if pullAddr != "" {
				if !cctx.Bool("pull") {
					return errors.New("--pull-addr serves a pull run: add --pull")
				}
				if err := needPullToken(cctx); err != nil {
					return err
				}
			}
			train, err := trainConfig(cctx)
			if err != nil {
				return err
			}
			s, err := connectForRun(cctx, &cfg)
			if err != nil {
				return err
			}
			defer s.Close()
			tq := cctx.String(wiring.FlagTaskQueue)
			if cctx.Bool("pull") {
				if _, err := pull.Start(cctx.Context, s.client, tq, cfg, train); err != nil {
					return err
				}
				fmt.Printf("Pull run %s started. Trainers connect with pull.New(client, %q).\n", cfg.RunID, cfg.RunID)
				if pullAddr != "" {
					srv, err := servePull(cctx, s.client, pullAddr, s.logger)
					if err != nil {
						return err
					}
					defer srv.stop()
					fmt.Printf("Pull API: %s/v1/pull/%s/ (Authorization: Bearer $EVALFLOW_PULL_TOKEN)\n", srv.url, cfg.RunID)
				}
				if s.Embedded() || s.worker != nil || pullAddr != "" {
					fmt.Fprintln(os.Stderr, "Serving it from this process; Ctrl-C stops.")
					<-cctx.Context.Done()
				}
				return nil
			}
			fmt.Fprintf(os.Stderr, "Starting training run %s: %s × %d tasks × groups of %d on %q.\n",
				cfg.RunID, epochsText(train.Epochs), cfg.Tasks, cfg.RolloutsPerTask, workflows.TasksetName(cfg.Taskset))
			account, closeAccount := newStoreAccount(cctx.Context, storeFlags(cctx), cfg.RunID)
			defer closeAccount()
			started, err := run.StartTrain(cctx.Context, s.client, tq, cfg, train)
			if err != nil {
				return err
			}
			warnStarted(&started)
			printWhere(s, cctx, cfg.RunID)
			defer startViewer(cctx, s.uiURL)()
			return watchTrain(cctx, s.client, cfg.RunID, account)
		},
	}
}

func resumeCommand() *cli.Command {
	return &cli.Command{
		Name:      "resume",
		Usage:     "continue a failed or killed run: finished epochs and rollouts are reused",
		ArgsUsage: "<run-id>",
		Flags: append(trainFlags(),
			&cli.BoolFlag{Name: "force", Usage: "resume with the changed flags given"},
		),
		Before: prepareRun(1),
		Action: func(cctx *cli.Context) error {
			runID, err := runArg(cctx)
			if err != nil {
				return err
			}
			s, err := connectForRun(cctx, nil)
			if err != nil {
				return err
			}
			defer s.Close()
			return resume(cctx, s, runID)
		},
	}
}

func resume(cctx *cli.Context, s *session, runID string) error {
	ctx := cctx.Context
	sc := storeFlags(cctx)
	// What the store holds now is what this resume reuses.
	account, closeAccount := newStoreAccount(ctx, sc, runID)
	defer closeAccount()
	in := run.ResumeInput{
		RunID:        runID,
		TaskQueue:    cctx.String(wiring.FlagTaskQueue),
		Settings:     func() (run.Settings, error) { return resumeSettings(cctx) },
		Force:        cctx.Bool("force"),
		RetryFailed:  cctx.Bool("retry-failed"),
		RunCostGiven: cctx.IsSet("max-run-cost"),
	}
	if s.usingMock() {
		in.Check = mockCanServe
	}
	r, err := run.Resume(ctx, s.client, in)
	var changed *run.ChangedError
	switch {
	case errors.Is(err, run.ErrNotFound):
		return fmt.Errorf("no run %s on the Temporal server at %s", runID, cctx.String(wiring.FlagAddress))
	case errors.As(err, &changed):
		return changedError(changed, "resume with the same flags, or add --force")
	case err != nil:
		return err
	}
	switch {
	case r.Started != nil:
		fmt.Fprintf(os.Stderr, "Resuming run %s (it ended %s): finished epochs and rollouts are reused.\n", runID, statusWord(r.Prior))
		warnStarted(r.Started)
	case r.Prior == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		fmt.Fprintf(os.Stderr, "Run %s is running: watching it.\n", runID)
		account.AttachedSince(r.StartedAt)
	default:
		fmt.Fprintf(os.Stderr, "Run %s has already finished.\n", runID)
	}
	printWhere(s, cctx, runID)
	if r.Kind == workflows.SweepName {
		return watchResumedSweep(ctx, s.client, runID, sc)
	}
	if r.Kind == workflows.EvalName {
		res, err := watch(ctx, s.client, runID, newProgressBar(os.Stderr))
		if errors.Is(err, context.Canceled) {
			fmt.Fprintf(os.Stderr, "\nStopped watching. Continue with: starter resume %s\n", runID)
			return exitCode(130)
		}
		if err != nil {
			return fmt.Errorf("run %s failed: %w", runID, err)
		}
		account.Eval(ctx, &res)
		printSummary(os.Stdout, res, sc)
		return nil
	}
	return watchTrain(cctx, s.client, runID, account)
}

// mockCanServe refuses to resume a run of a real model on this process's
// worker, which has no provider and answers with the offline mock.
func mockCanServe(cfg workflows.RunConfig) error {
	if cfg.Model == mockModel {
		return nil
	}
	return fmt.Errorf("run %s uses model %q, but no provider is configured here (--base-url / OPENAI_BASE_URL): "+
		"its rollouts would get the offline mock's answers; configure the provider it ran with", cfg.RunID, cfg.Model)
}

// watchTrain follows a training run epoch by epoch until it ends, and
// reports what it ran and reused as the run store counts it (account).
func watchTrain(cctx *cli.Context, c client.Client, runID string, account *run.Account) error {
	ctx := cctx.Context
	end := make(chan error, 1)
	var res workflows.TrainResult
	go func() { end <- c.GetWorkflow(ctx, runID, "").Get(ctx, &res) }()
	bar := newProgressBar(os.Stderr)
	epoch := -1
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case err := <-end:
			bar.finish()
			if ctx.Err() != nil {
				fmt.Fprintf(os.Stderr, "\nStopped watching. Continue with: starter resume %s\n", runID)
				return exitCode(130)
			}
			if err != nil {
				return fmt.Errorf("run %s failed: %w", runID, err)
			}
			account.Train(ctx, &res)
			printTrainSummary(os.Stdout, res, storeFlags(cctx))
			return nil
		case <-t.C:
			tp, err := run.TrainProgress(ctx, c, runID)
			if err != nil {
				continue
			}
			if tp.Epoch != epoch {
				bar.finish()
				epoch = tp.Epoch
				bar.notice("epoch %d of %s", epoch, epochsText(tp.Epochs))
			}
			if p, err := run.Progress(ctx, c, workflows.EpochID(runID, epoch)); err == nil {
				bar.draw(p)
			}
		}
	}
}

func printTrainSummary(w io.Writer, r workflows.TrainResult, sc wiring.StoreConfig) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "run\t%s\n", r.RunID)
	if len(r.Skipped) > 0 {
		fmt.Fprintf(tw, "skipped epochs\t%v (already finished)\n", r.Skipped)
	}
	fmt.Fprintf(tw, "epoch\trollouts\tran\treused\tfailed\tmean reward\tgroup std\tpass@1\tcost\twall time\n")
	for _, e := range r.Epochs {
		pass := 0.0
		if len(e.Run.PassAtK) > 0 {
			pass = e.Run.PassAtK[0].Value
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%.3f\t%.3f\t%.3f\t$%.4f\t%s\n",
			e.Epoch, e.Run.Rollouts, e.Ran, e.Run.Reused, e.Run.Failed, e.Run.MeanReward, e.MeanGroupStd, pass, e.Run.CostUSD, e.Run.WallTime)
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%d\t%.3f\t\t\t$%.4f\t%s\n", r.Rollouts, r.Ran, r.Reused, r.Failed, r.MeanReward, r.CostUSD, r.WallTime)
	if r.UnpricedRollouts > 0 {
		fmt.Fprintf(tw, "cost\tunknown for %d rollouts: a call of a model without a price, add it with --prices, or an answer without usage\n", r.UnpricedRollouts)
	}
	if sc.URL != "" {
		fmt.Fprintf(tw, "results\t%s\n", runLocation(sc, r.RunID))
	} else {
		fmt.Fprintf(tw, "results\t%s (rollouts.jsonl, groups/, epochs/)\n", runLocation(sc, r.RunID))
	}
	tw.Flush()
}

func epochsText(n int) string {
	if n == 0 {
		return "unbounded epochs"
	}
	return fmt.Sprintf("%d epochs", n)
}
