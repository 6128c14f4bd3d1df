package orchestration

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.temporal.io/sdk/testsuite"
	"golang.org/x/sync/errgroup"

	"github.com/evalflow/evalflow/activities"
	"github.com/evalflow/evalflow/bench/internal/loadgen"
	"github.com/evalflow/evalflow/bench/internal/upstream"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
)

// Errgroup runs the same rollouts as Temporal without Temporal: an errgroup
// limited to cfg.Concurrency runs each rollout's Acquire → Expose → Run
// activities in turn, in process, with the same dependencies wiring gives a
// worker (interception pool, local harness runtime, run store, capacity).
// The activities run in Temporal's test activity environment, which gives
// them an activity context (heartbeats) without a server.
func Errgroup(ctx context.Context, runID string, cfg Config) (Result, error) {
	base, stopMock, err := upstream.Listen(upstream.New(upstream.Config{}), false)
	if err != nil {
		return Result{}, err
	}
	defer stopMock()
	store, err := results.Open(cfg.RunsDir)
	if err != nil {
		return Result{}, err
	}
	pool := interception.NewPool(interception.Config{Upstream: providers.NewOpenAI(base+"/v1", ""), Multiplex: 32})
	defer pool.Close()
	acts := &activities.Activities{
		Pool: pool, Runtime: &local.Runtime{}, Store: store, Tasksets: &activities.TasksetCache{},
		HostQueue: "errgroup", DefaultHarness: cfg.harness(), Capacity: activities.NewCapacity(cfg.Concurrency),
		Logger: slog.New(slog.DiscardHandler),
	}
	envs := make(chan *testsuite.TestActivityEnvironment, cfg.Concurrency)
	var suite testsuite.WorkflowTestSuite
	for range cfg.Concurrency {
		env := suite.NewTestActivityEnvironment()
		env.RegisterActivity(acts)
		envs <- env
	}
	rc := RunConfig(runID, cfg)

	var (
		mu    sync.Mutex
		waits []time.Duration
		fails int64
	)
	step := func(since time.Time, fn any, in any, out any) error {
		env := <-envs
		defer func() { envs <- env }()
		wait := time.Since(since)
		mu.Lock()
		waits = append(waits, wait)
		mu.Unlock()
		v, err := env.ExecuteActivity(fn, in)
		if err != nil {
			return err
		}
		if out == nil {
			return nil
		}
		return v.Get(out)
	}
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Concurrency)
	for i := range int64(cfg.Rollouts) {
		ref := rollout.Ref{
			RunID: runID, Index: i, Taskset: rc.Taskset, Model: rc.Model,
			Harness: rc.Harness, Rubric: rc.Rubric, Attempt: 1,
		}
		g.Go(func() error {
			admitted := time.Now()
			var slot rollout.AcquireResult
			if err := step(admitted, acts.Acquire, rollout.AcquireInput{Rollout: ref}, &slot); err != nil {
				return fmt.Errorf("acquire %s: %w", ref.Key(), err)
			}
			var exp rollout.ExposeResult
			if err := step(time.Now(), acts.Expose, rollout.ExposeInput{Key: ref.Key()}, &exp); err != nil {
				return fmt.Errorf("expose %s: %w", ref.Key(), err)
			}
			var s rollout.Summary
			if err := step(time.Now(), acts.Run, rollout.RunInput{Rollout: ref, BaseURL: exp.BaseURL}, &s); err != nil {
				return fmt.Errorf("run %s: %w", ref.Key(), err)
			}
			if s.Status != rollout.StatusOK {
				mu.Lock()
				fails++
				mu.Unlock()
			}
			return gctx.Err()
		})
	}
	if err := g.Wait(); err != nil {
		return Result{}, err
	}
	wall := time.Since(start)
	return Result{
		System: "errgroup", Rollouts: cfg.Rollouts, Concurrency: cfg.Concurrency, Failed: fails,
		WallSeconds: wall.Seconds(), RolloutsPerSec: float64(cfg.Rollouts) / wall.Seconds(),
		ScheduleToStart: loadgen.Summarize(waits),
	}, nil
}
