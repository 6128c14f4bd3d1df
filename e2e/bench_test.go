package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/tasksets"
	"github.com/evalflow/evalflow/wiring"
	"github.com/evalflow/evalflow/workflows"
)

// benchRollouts is the size of each benchmark's eval, and benchConcurrency
// its rollouts in flight (one worker holding as many).
const (
	benchRollouts    = 64
	benchConcurrency = 8
)

// benchEval runs evals of benchRollouts rollouts on the embedded server
// with one in-process worker, and reports rollouts/s and ms/rollout over
// the evals' wall time (server start excluded).
func benchEval(b *testing.B, rt harness.Runtime, cfg workflows.RunConfig) {
	_, c := startServer(b)
	workDir := b.TempDir()
	if rt == nil {
		rt = &harness.Local{Dir: workDir}
	}
	w, err := wiring.NewWorker(c, wiring.Config{
		TaskQueue: "bench", RunsDir: b.TempDir(), WorkDir: workDir, MaxRollouts: benchConcurrency, Multiplex: benchConcurrency,
		Runtime: rt, DefaultHarness: agentCommand, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	cfg.MaxConcurrent, cfg.Model = benchConcurrency, "mock"
	var wall time.Duration
	n := 0
	for b.Loop() {
		n++
		cfg.RunID = fmt.Sprintf("bench-%d", n)
		start := time.Now()
		run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: cfg.RunID, TaskQueue: "bench"}, wiring.EvalWorkflowName, workflows.EvalInput{Config: cfg})
		if err != nil {
			b.Fatal(err)
		}
		var res workflows.Result
		if err := run.Get(context.Background(), &res); err != nil {
			b.Fatal(err)
		}
		wall += time.Since(start)
		if res.Rollouts != benchRollouts || res.Failed != 0 {
			b.Fatalf("%d rollouts, %d failed: %+v", res.Rollouts, res.Failed, res.FailedSamples)
		}
	}
	per := wall.Seconds() / float64(n*benchRollouts)
	b.ReportMetric(1/per, "rollouts/s")
	b.ReportMetric(per*1000, "ms/rollout")
}

// harborBench is the bundled Harbor tasks, each run benchRollouts/8 times.
func harborBench(h rollout.HarnessConfig) workflows.RunConfig {
	return workflows.RunConfig{Taskset: tasksets.HarborSampleName, RolloutsPerTask: benchRollouts / 8, Harness: h}
}

// BenchmarkRolloutsHarborOracle: the bundled Harbor tasks solved by the
// oracle in the local runtime: workspace, solve.sh, Verify (test.sh).
func BenchmarkRolloutsHarborOracle(b *testing.B) {
	benchEval(b, nil, harborBench(rollout.HarnessConfig{Oracle: true}))
}

// BenchmarkRolloutsHarborOracleBwrap: the same in bwrap sandboxes.
func BenchmarkRolloutsHarborOracleBwrap(b *testing.B) {
	benchEval(b, &harness.Bwrap{Local: harness.Local{Dir: b.TempDir()}}, harborBench(rollout.HarnessConfig{Oracle: true}))
}

// BenchmarkRolloutsHarborNoop: the bundled Harbor tasks with a harness
// that does nothing (`true`): workspace and Verify without the solution.
func BenchmarkRolloutsHarborNoop(b *testing.B) {
	benchEval(b, nil, harborBench(rollout.HarnessConfig{Command: []string{"true"}}))
}

// BenchmarkRolloutsArithmeticNoop is the baseline: as many arithmetic
// rollouts with a harness that does nothing, no workspace and no Verify.
func BenchmarkRolloutsArithmeticNoop(b *testing.B) {
	benchEval(b, nil, workflows.RunConfig{Taskset: "arithmetic", Tasks: benchRollouts, Harness: rollout.HarnessConfig{Command: []string{"true"}}})
}
