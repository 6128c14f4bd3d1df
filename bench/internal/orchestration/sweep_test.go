package orchestration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/run"
	"github.com/evalflow/evalflow/workflows"
)

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
