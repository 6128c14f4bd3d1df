// Command worker runs evalflow rollouts for runs on a Temporal cluster. Start
// as many as you like, on as many machines; they share the work through the
// task queue. Provider keys are read from this process's environment only.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/internal/harness/agent"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/tunnel"
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
		Flags:   append(wiring.WorkerFlags(), wiring.ServiceFlags()...),
		Before: func(cctx *cli.Context) error {
			if cctx.Args().Present() {
				return fmt.Errorf("unexpected argument %q: the worker takes flags only", cctx.Args().First())
			}
			return nil
		},
		Action: serve,
	}
}

// serve runs the worker as a service: it waits for Temporal and the run
// store within --start-timeout, serves until SIGTERM or SIGINT, then stops
// polling and drains within --drain-timeout. A signal in any of these
// states ends the process within seconds of what it waits for.
func serve(cctx *cli.Context) error {
	h, err := wiring.NewLogHandler(cctx, os.Stderr)
	if err != nil {
		return err
	}
	logger := slog.New(h)
	startTimeout, drainTimeout, err := wiring.ServiceTimeouts(cctx)
	if err != nil {
		return err
	}
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
	cfg.DrainTimeout = drainTimeout
	conn := wiring.ConnectionFromFlags(cctx)
	startCtx, cancel := context.WithTimeout(cctx.Context, startTimeout)
	defer cancel()
	c, err := wiring.WaitForTemporal(startCtx, conn, logger)
	if errors.Is(err, wiring.ErrStopped) {
		logger.Info("stopped before starting", "reason", err.Error())
		return nil
	}
	if err != nil {
		return err
	}
	defer c.Close()
	if err := wiring.CheckNamespace(startCtx, c, conn); err != nil {
		return err
	}
	if cfg.Store, err = wiring.WaitForStore(startCtx, wiring.StoreFromFlags(cctx), logger); errors.Is(err, wiring.ErrStopped) {
		logger.Info("stopped before starting", "reason", err.Error())
		return nil
	} else if err != nil {
		return err
	}
	cancel()
	w, err := wiring.NewWorker(c, cfg)
	if err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return err
	}
	logger.Info("worker started", "version", wiring.Version(), "address", conn.String(), "task_queue", cfg.TaskQueue,
		"store", cfg.StoreName(), "mock_model", w.UsingMock, "metrics", w.MetricsAddr())
	<-cctx.Context.Done()
	return drain(w, drainTimeout, logger)
}

// drain stops w: no new rollouts, running ones have the drain timeout to
// finish. A second signal hands them back at once; a stop that overruns
// its bound ends the process all the same.
func drain(w *wiring.Worker, timeout time.Duration, logger *slog.Logger) error {
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	logger.Info("stopping: polling no more; running rollouts may finish, then are handed back", "drain_timeout", timeout.String())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		w.Stop()
	}()
	bound := time.NewTimer(wiring.StopTimeout(timeout))
	defer bound.Stop()
	for {
		select {
		case <-stopped:
			logger.Info("stopped")
			return nil
		case <-again:
			logger.Warn("second signal: handing running rollouts back now")
			w.HandBack()
		case <-bound.C:
			return fmt.Errorf("the worker did not stop within %s (--%s plus a margin)", wiring.StopTimeout(timeout), wiring.FlagDrainTimeout)
		}
	}
}
