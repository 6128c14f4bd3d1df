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

	"github.com/evalflow/evalflow/internal/harness/agent"
	"github.com/evalflow/evalflow/internal/tunnel"
	"github.com/evalflow/evalflow/internal/wiring"
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
	if err := newApp().RunContext(ctx, os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	return 0
}

// newApp is the worker's command line: the shared worker flags, nothing else.
func newApp() *cli.App {
	return &cli.App{
		Name:    "worker",
		Usage:   "run evalflow rollouts from a Temporal task queue",
		Version: wiring.Version(),
		Flags:   wiring.WorkerFlags(),
		Before: func(cctx *cli.Context) error {
			if cctx.Args().Present() {
				return fmt.Errorf("unexpected argument %q: the worker takes flags only", cctx.Args().First())
			}
			return nil
		},
		Action: serve,
	}
}

func serve(cctx *cli.Context) error {
	h, err := wiring.NewLogHandler(cctx, os.Stderr)
	if err != nil {
		return err
	}
	logger := slog.New(h)
	cfg, closeRuntime, err := wiring.ConfigFromFlags(cctx)
	if err != nil {
		return err
	}
	defer func() {
		if err := closeRuntime(); err != nil {
			logger.Warn("close harness runtime", "error", err)
		}
	}()
	cfg.Logger = logger
	conn := wiring.ConnectionFromFlags(cctx)
	c, err := wiring.DialConnection(cctx.Context, conn, logger, 30*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := wiring.CheckNamespace(cctx.Context, c, conn); err != nil {
		return err
	}
	w, err := wiring.NewWorker(c, cfg)
	if err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	logger.Info("worker started", "version", wiring.Version(), "address", conn.String(), "task_queue", cfg.TaskQueue,
		"store", cfg.StoreName(), "mock_model", w.UsingMock, "metrics", w.MetricsAddr())
	<-cctx.Context.Done()
	logger.Info("stopping: waiting for running rollouts")
	return nil
}
