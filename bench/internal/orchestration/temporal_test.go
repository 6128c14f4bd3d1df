package orchestration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/namespace"
	"github.com/evalflow/evalflow/internal/temporalcluster"
	"github.com/evalflow/evalflow/run"
	"github.com/evalflow/evalflow/workflows"
)

// BenchmarkEvalEmbeddedVsCluster runs one eval of no-op rollouts on the
// embedded server (SQLite, one process) and on the real server as four
// processes on PostgreSQL (deploy/temporal/config.yaml, 16 shards), each
// with one in-process worker, alternating, in one run. Each iteration is a
// whole eval; run with -benchtime 1x -count N. Figures: rollouts/s, and the
// history events a rollout costs (the longest run of the chain over the
// rollouts it held), which docs/scaling.md plans with.
func BenchmarkEvalEmbeddedVsCluster(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	_, embedded := devtest.StartEvalflow(b)
	cc := temporalcluster.ForTest(b, temporalcluster.Options{Shards: 16}).Dial(b, "default")
	_, err := namespace.Ensure(ctx, namespace.Services{Workflow: cc.WorkflowService(), Operator: cc.OperatorService()}, namespace.Evalflow("default"))
	require.NoError(b, err)

	const rollouts, concurrency = 500, 64
	systems := []struct {
		name   string
		client client.Client
	}{{"embedded", embedded}, {"cluster", cc}}
	for _, sys := range systems {
		b.Run(sys.name, func(b *testing.B) {
			cfg := Config{Rollouts: rollouts, Concurrency: concurrency, RunsDir: b.TempDir()}
			queue := "bench-" + sys.name
			w, err := NewWorker(sys.client, queue, cfg)
			require.NoError(b, err)
			defer w.Stop()
			var last Result
			for i := range b.N {
				last, err = Temporal(ctx, sys.client, queue, fmt.Sprintf("bench-%s-%d-%d", sys.name, time.Now().UnixNano(), i), cfg)
				require.NoError(b, err)
				require.Zero(b, last.Failed)
			}
			b.ReportMetric(last.RolloutsPerSec, "rollouts/s")
			b.ReportMetric(last.WallSeconds, "wall-s")
			b.ReportMetric(float64(last.MaxHistory)/float64(min(rollouts, last.perRun())), "events/rollout")
			b.ReportMetric(last.ScheduleToStart.P50/1000, "sched-to-start-p50-ms")
		})
	}
}

// perRun is how many rollouts the longest run of the chain held.
func (r Result) perRun() int {
	if r.Runs <= 1 {
		return r.Rollouts
	}
	return (r.Rollouts + r.Runs - 1) / r.Runs
}

// BenchmarkSweepVsEvals runs the same rollouts of four harness × model
// cells of no-op rollouts three ways, alternating, on the embedded server
// with one worker and the same rollouts in flight (64) each way: as one
// sweep (the cells at once, 16 each), as four evaluations one after
// another (what comparing four configurations took before sweeps, each
// with all 64), and as one evaluation of all the rollouts (no cells at
// all). Each iteration is the whole job; run with -benchtime 1x -count N.
// Figures: wall seconds and rollouts/s.
func BenchmarkSweepVsEvals(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	_, cl := devtest.StartEvalflow(b)

	const perCell, concurrency = 64, 16
	cells := []workflows.SweepCell{}
	for _, h := range []string{"agent", "shell"} {
		for _, m := range []string{"mock-a", "mock-b"} {
			cells = append(cells, workflows.SweepCell{Name: h + "@" + m, HarnessName: h, Model: m,
				Harness: workflowsHarness([]string{"true"})})
		}
	}
	cfg := Config{Rollouts: perCell, Concurrency: concurrency, RunsDir: b.TempDir()}
	w, err := NewWorker(cl, "bench-sweep", Config{Concurrency: len(cells) * concurrency, RunsDir: cfg.RunsDir})
	require.NoError(b, err)
	defer w.Stop()

	jobs := []struct {
		name string
		run  func(id string) (int64, error)
	}{
		{"sweep", func(id string) (int64, error) {
			if _, err := run.StartSweep(ctx, cl, "bench-sweep", workflows.SweepInput{Config: RunConfig(id, cfg), Cells: cells}); err != nil {
				return 0, err
			}
			var res workflows.SweepResult
			if err := cl.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
				return 0, err
			}
			var n int64
			for _, c := range res.Cells {
				if c.Error != "" {
					return n, fmt.Errorf("cell %s: %s", c.Name, c.Error)
				}
				n += c.Result.Rollouts - c.Result.Failed
			}
			return n, nil
		}},
		{"evals-one-after-another", func(id string) (int64, error) {
			var n int64
			one := cfg
			one.Concurrency = len(cells) * concurrency // each with every slot
			for _, c := range cells {
				r, err := Temporal(ctx, cl, "bench-sweep", workflows.CellRunID(id, c.Name), one)
				if err != nil {
					return n, err
				}
				n += int64(r.Rollouts) - r.Failed
			}
			return n, nil
		}},
		{"one-eval-of-all", func(id string) (int64, error) {
			all := cfg
			all.Rollouts, all.Concurrency = len(cells)*perCell, len(cells)*concurrency
			r, err := Temporal(ctx, cl, "bench-sweep", id, all)
			return int64(r.Rollouts) - r.Failed, err
		}},
	}
	for _, job := range jobs {
		b.Run(job.name, func(b *testing.B) {
			var wall time.Duration
			for i := range b.N {
				start := time.Now()
				n, err := job.run(fmt.Sprintf("bench-%s-%d-%d", job.name, time.Now().UnixNano(), i))
				wall = time.Since(start)
				require.NoError(b, err)
				require.Equal(b, int64(len(cells)*perCell), n, "every rollout of every cell ran")
			}
			b.ReportMetric(wall.Seconds(), "wall-s")
			b.ReportMetric(float64(len(cells)*perCell)/wall.Seconds(), "rollouts/s")
		})
	}
}
