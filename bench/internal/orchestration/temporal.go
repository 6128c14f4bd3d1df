package orchestration

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/bench/internal/loadgen"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

func workflowsHarness(cmd []string) rollout.HarnessConfig {
	return rollout.HarnessConfig{Command: cmd, Timeout: time.Minute}
}

// NewWorker starts a worker from wiring.NewWorker on queue, with the
// offline mock model (zero latency) as its upstream.
func NewWorker(c client.Client, queue string, cfg Config) (*wiring.Worker, error) {
	w, err := wiring.NewWorker(c, wiring.Config{
		TaskQueue:      queue,
		RunsDir:        cfg.RunsDir,
		StoreURL:       cfg.StoreURL,
		MaxRollouts:    cfg.Concurrency,
		DefaultHarness: cfg.harness(),
		Logger:         slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, fmt.Errorf("new worker: %w", err)
	}
	if err := w.Start(); err != nil {
		return nil, err
	}
	return w, nil
}

// Temporal runs the eval as an EvalWorkflow on queue, which a worker must
// poll, and measures it from start to result.
func Temporal(ctx context.Context, c client.Client, queue, runID string, cfg Config) (Result, error) {
	start := time.Now()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: runID, TaskQueue: queue, WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}, wiring.EvalWorkflowName, workflows.EvalInput{Config: RunConfig(runID, cfg)})
	if err != nil {
		return Result{}, fmt.Errorf("start eval: %w", err)
	}
	var res workflows.Result
	if err := c.GetWorkflow(ctx, runID, "").Get(ctx, &res); err != nil {
		return Result{}, fmt.Errorf("eval %s: %w", runID, err)
	}
	wall := time.Since(start)
	out := Result{
		System: "temporal", Rollouts: cfg.Rollouts, Concurrency: cfg.Concurrency, Failed: res.Failed,
		WallSeconds: wall.Seconds(), RolloutsPerSec: float64(res.Rollouts) / wall.Seconds(),
	}
	h, err := Histories(ctx, c, runID, run.GetRunID())
	if err != nil {
		return out, err
	}
	out.Runs, out.MaxHistory, out.ScheduleToStart = len(h.Events), h.Max(), loadgen.Summarize(h.ScheduleToStart)
	out.ByActivity = map[string]loadgen.Summary{}
	for typ, ds := range h.ByType {
		out.ByActivity[typ] = loadgen.Summarize(ds)
	}
	return out, nil
}

// Chain is what the histories of a continue-as-new chain hold.
type Chain struct {
	// Events is each run's history length.
	Events []int
	// ScheduleToStart is every activity's wait from scheduled to started.
	ScheduleToStart []time.Duration
	// ByType is ScheduleToStart by activity type.
	ByType map[string][]time.Duration
}

// Max is the longest history of the chain.
func (c Chain) Max() int {
	m := 0
	for _, n := range c.Events {
		m = max(m, n)
	}
	return m
}

// Histories reads every history of a workflow's continue-as-new chain
// starting at firstRunID.
func Histories(ctx context.Context, c client.Client, id, firstRunID string) (Chain, error) {
	out := Chain{ByType: map[string][]time.Duration{}}
	for runID := firstRunID; runID != ""; {
		scheduled := map[int64]time.Time{}
		types := map[int64]string{}
		it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		next, n := "", 0
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return out, fmt.Errorf("history of %s: %w", id, err)
			}
			n++
			switch {
			case ev.GetActivityTaskScheduledEventAttributes() != nil:
				scheduled[ev.GetEventId()] = ev.GetEventTime().AsTime()
				types[ev.GetEventId()] = ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
			case ev.GetActivityTaskStartedEventAttributes() != nil:
				id := ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()
				if at, ok := scheduled[id]; ok {
					d := ev.GetEventTime().AsTime().Sub(at)
					out.ScheduleToStart = append(out.ScheduleToStart, d)
					out.ByType[types[id]] = append(out.ByType[types[id]], d)
				}
			case ev.GetWorkflowExecutionContinuedAsNewEventAttributes() != nil:
				next = ev.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
			}
		}
		out.Events = append(out.Events, n)
		runID = next
	}
	return out, nil
}
