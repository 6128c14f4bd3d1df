package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/tasksets"
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
	benchEvalAt(b, benchConcurrency, rt, cfg)
}

// benchEvalAt is benchEval with inFlight rollouts in flight; it also
// reports the process's peak resident memory during the evals (the
// worker's, with the embedded server's).
func benchEvalAt(b *testing.B, inFlight int, rt harness.Runtime, cfg workflows.RunConfig) {
	_, c := devtest.StartEvalflow(b)
	workDir := b.TempDir()
	if rt == nil {
		rt = &local.Runtime{Dir: workDir}
	}
	w, err := wiring.NewWorker(c, wiring.Config{
		TaskQueue: "bench", RunsDir: b.TempDir(), WorkDir: workDir, MaxRollouts: inFlight, Multiplex: inFlight,
		Runtime: rt, DefaultHarness: agentCommand, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	cfg.MaxConcurrent, cfg.Model = inFlight, "mock"
	peak := sampleRSS()
	defer peak.stop()
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
	b.ReportMetric(float64(peak.stop())/(1<<20), "peak-MB")
}

// rssSampler keeps the largest resident set size seen every 50 ms.
type rssSampler struct {
	done chan struct{}
	max  chan int64
}

func sampleRSS() *rssSampler {
	s := &rssSampler{done: make(chan struct{}), max: make(chan int64, 1)}
	go func() {
		var peak int64
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if n := rss(); n > peak {
				peak = n
			}
			select {
			case <-s.done:
				s.max <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the peak; later calls return 0.
func (s *rssSampler) stop() int64 {
	select {
	case <-s.done:
		return 0
	default:
	}
	close(s.done)
	return <-s.max
}

// rss is this process's resident set size in bytes (/proc/self/statm).
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
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
	benchEval(b, bwrapRuntime(b), harborBench(rollout.HarnessConfig{Oracle: true}))
}

// BenchmarkRollouts16Container: 64 rollouts of the bundled tasks solved by
// the oracle at 16 in flight, each in a container sandbox of its task's
// image on the test engine; BenchmarkRollouts16Bwrap the same in bwrap.
func BenchmarkRollouts16Container(b *testing.B) {
	benchEvalAt(b, 16, containerRuntime(b), harborBench(rollout.HarnessConfig{Oracle: true}))
}

func BenchmarkRollouts16Bwrap(b *testing.B) {
	benchEvalAt(b, 16, bwrapRuntime(b), harborBench(rollout.HarnessConfig{Oracle: true}))
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
