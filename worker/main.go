// Command worker runs evalflow rollouts for runs on a Temporal cluster. Start
// as many as you like, on as many machines; they share the work through the
// task queue. Provider keys are read from this process's environment only.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/harness/agent"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/tunnel"
	"github.com/evalflow/evalflow/wiring"
)

func main() {
	// An frp tunnel runs its client as a child process of this binary.
	tunnel.ServeFRPClientIfAsked()
	// The built-in agent is this binary's hidden "agent" command: rollouts run
	// it as a subprocess.
	agent.ServeIfAsked()
	os.Exit(run())
}

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	app := &cli.App{
		Name:  "worker",
		Usage: "run evalflow rollouts from a Temporal task queue",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "address", Value: "localhost:7233", EnvVars: []string{"EVALFLOW_ADDRESS", "TEMPORAL_ADDRESS"}, Usage: "Temporal frontend"},
			&cli.StringFlag{Name: "namespace", Value: "default", EnvVars: []string{"EVALFLOW_NAMESPACE", "TEMPORAL_NAMESPACE"}, Usage: "Temporal namespace"},
			&cli.StringFlag{Name: "task-queue", Value: wiring.DefaultTaskQueue, EnvVars: []string{"EVALFLOW_TASK_QUEUE"}, Usage: "task queue runs are started on"},
			&cli.StringFlag{Name: "runs-dir", Value: "runs", EnvVars: []string{"EVALFLOW_RUNS_DIR"}, Usage: "run store (share it between workers of one run)"},
			&cli.StringFlag{Name: "base-url", EnvVars: []string{"OPENAI_BASE_URL"}, Usage: "OpenAI-compatible provider (empty: the offline mock model)"},
			&cli.StringFlag{Name: "api-key-env", EnvVars: []string{"EVALFLOW_API_KEY_ENV"}, Usage: "name of the environment variable holding the provider key (default OPENAI_API_KEY, or ANTHROPIC_API_KEY with --upstream-dialect anthropic)"},
			&cli.StringFlag{Name: "upstream-dialect", Value: "chat", EnvVars: []string{"EVALFLOW_UPSTREAM_DIALECT"}, Usage: "wire format of the provider: chat, responses or anthropic"},
			&cli.IntFlag{Name: "max-rollouts", Value: 64, EnvVars: []string{"EVALFLOW_MAX_ROLLOUTS"}, Usage: "rollouts this worker runs at once"},
			&cli.IntFlag{Name: "multiplex", Value: 32, EnvVars: []string{"EVALFLOW_MULTIPLEX"}, Usage: "rollouts sharing one interception server"},
			&cli.StringFlag{Name: "work-dir", EnvVars: []string{"EVALFLOW_WORK_DIR"}, Usage: "parent of harness workdirs (default: the system temp dir)"},
		},
		Action: serve,
	}
	app.Flags = append(app.Flags, wiring.RuntimeFlags()...)
	app.Flags = append(app.Flags, wiring.InterceptionFlags()...)
	if err := app.RunContext(ctx, os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	return 0
}

func serve(cctx *cli.Context) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ic, err := wiring.InterceptionFromFlags(cctx)
	if err != nil {
		return err
	}
	c, err := wiring.Dial(cctx.Context, cctx.String("address"), cctx.String("namespace"), logger, 30*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	rt, closeRuntime, err := wiring.RuntimeFromFlags(cctx, cctx.String("work-dir"))
	if err != nil {
		return err
	}
	defer func() {
		if err := closeRuntime(); err != nil {
			logger.Warn("close harness runtime", "error", err)
		}
	}()
	w, err := wiring.NewWorker(c, wiring.Config{
		Runtime:         rt,
		Interception:    ic,
		TaskQueue:       cctx.String("task-queue"),
		RunsDir:         cctx.String("runs-dir"),
		BaseURL:         cctx.String("base-url"),
		APIKeyEnv:       cctx.String("api-key-env"),
		UpstreamDialect: cctx.String("upstream-dialect"),
		MaxRollouts:     cctx.Int("max-rollouts"),
		Multiplex:       cctx.Int("multiplex"),
		WorkDir:         cctx.String("work-dir"),
		Mock:            mock.Config{},
		Logger:          logger,
	})
	if err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	logger.Info("worker started", "address", cctx.String("address"), "task_queue", cctx.String("task-queue"), "mock_model", w.UsingMock)
	<-cctx.Context.Done()
	logger.Info("stopping: waiting for running rollouts")
	return nil
}
