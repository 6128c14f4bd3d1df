package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/bench/internal/orchestration"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/workflows"
)

// concurrency is the rollouts in flight in both systems: the worker's
// default MaxRollouts.
const concurrency = 64

func orchestrationSection(ctx context.Context, o options, logf func(string, ...any)) ([]OrchestrationRow, error) {
	dir, err := os.MkdirTemp("", "evalflow-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	srv, err := orchestration.StartServer(ctx, filepath.Join(dir, "temporal"))
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	sizes := []int{128, 1000}
	if o.quick {
		sizes = []int{64}
	}
	var rows []OrchestrationRow
	for i, n := range sizes {
		cfg := orchestration.Config{Rollouts: n, Concurrency: concurrency, RunsDir: filepath.Join(dir, "runs")}
		queue := fmt.Sprintf("bench-%d", n)
		w, err := orchestration.NewWorker(srv.Client, queue, cfg)
		if err != nil {
			return nil, err
		}
		runs := []func() (orchestration.Result, error){
			func() (orchestration.Result, error) {
				return orchestration.Temporal(ctx, srv.Client, queue, fmt.Sprintf("bench-temporal-%d", n), cfg)
			},
			func() (orchestration.Result, error) {
				return orchestration.Errgroup(ctx, fmt.Sprintf("bench-errgroup-%d", n), cfg)
			},
		}
		if i%2 == 1 {
			runs[0], runs[1] = runs[1], runs[0]
		}
		for _, run := range runs {
			r, err := run()
			if err != nil {
				w.Stop()
				return nil, err
			}
			rows = append(rows, r)
			logf("  %-8s %5d rollouts ×%d: %6.2fs %7.1f/s schedule-to-start p50 %7.1fµs p99 %8.1fµs failed %d runs %d max history %d",
				r.System, r.Rollouts, r.Concurrency, r.WallSeconds, r.RolloutsPerSec, r.ScheduleToStart.P50, r.ScheduleToStart.P99,
				r.Failed, r.Runs, r.MaxHistory)
		}
		w.Stop()
	}
	return rows, nil
}

// workerMain is the worker of the scale section, run as a child process so
// that its resident set is measured alone.
func workerMain(args []string) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	address := fs.String("address", "", "temporal frontend")
	queue := fs.String("queue", "", "task queue")
	runs := fs.String("runs", "", "run store")
	conc := fs.Int("concurrency", concurrency, "max rollouts")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	c, err := wiring.Dial(ctx, *address, "default", slog.New(slog.DiscardHandler), time.Minute)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	defer c.Close()
	w, err := orchestration.NewWorker(c, *queue, orchestration.Config{Concurrency: *conc, RunsDir: *runs})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes stdin
	w.Stop()
	return 0
}

func scaleSection(ctx context.Context, o options, logf func(string, ...any)) (*Scale, error) {
	n := 20000
	if o.quick {
		n = 2000
	}
	dir, err := os.MkdirTemp("", "evalflow-bench-scale-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	srv, err := orchestration.StartServer(ctx, filepath.Join(dir, "temporal"))
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	const queue = "bench-scale"
	w, err := spawn(ctx, "worker", "worker", "-address", srv.Srv.Address(), "-queue", queue,
		"-runs", filepath.Join(dir, "runs"), "-concurrency", strconv.Itoa(concurrency))
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.stdin.Close(); _ = w.cmd.Wait() }()

	const runID = "bench-scale"
	cfg := orchestration.Config{Rollouts: n, Concurrency: concurrency}
	start := time.Now()
	run, err := srv.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: runID, TaskQueue: queue},
		wiring.EvalWorkflowName, workflows.EvalInput{Config: orchestration.RunConfig(runID, cfg)})
	if err != nil {
		return nil, err
	}
	out := &Scale{Rollouts: n, Concurrency: concurrency}
	pid := w.cmd.Process.Pid
	next := int64(1000)
	doneCh := make(chan error, 1)
	var res workflows.Result
	go func() { doneCh <- srv.Client.GetWorkflow(ctx, runID, "").Get(ctx, &res) }()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for finished := false; !finished; {
		select {
		case err := <-doneCh:
			if err != nil {
				return nil, err
			}
			finished = true
		case <-tick.C:
			v, err := srv.Client.QueryWorkflow(ctx, runID, "", workflows.QueryProgress)
			if err != nil {
				continue // between two runs of the chain
			}
			var p workflows.Progress
			if v.Get(&p) != nil {
				continue
			}
			if p.Done >= next {
				cur, _ := rss(pid)
				out.RSS = append(out.RSS, RSSSample{Done: p.Done, RSS: cur})
				logf("  %6d done · %.0f/s · worker rss %d MB", p.Done, float64(p.Done)/time.Since(start).Seconds(), cur>>20)
				next = (p.Done/1000 + 1) * 1000
			}
		}
	}
	out.WallSeconds = time.Since(start).Seconds()
	cur, _ := rss(pid)
	out.RSS = append(out.RSS, RSSSample{Done: res.Rollouts, RSS: cur})
	out.Failed = res.Failed
	chain, err := orchestration.Histories(ctx, srv.Client, runID, run.GetRunID())
	if err != nil {
		return nil, err
	}
	out.Runs, out.MaxHistory = len(chain.Events), chain.Max()
	out.RecordedAt = time.Now().UTC().Format(time.RFC3339)
	logf("  %d rollouts in %.1fs: %d runs, longest history %d events, %d failed", res.Rollouts, out.WallSeconds, out.Runs, out.MaxHistory, out.Failed)
	return out, nil
}
