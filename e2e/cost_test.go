package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/workflows"
)

// TestEvalStopsAtMaxRunCost runs an eval of the built-in agent against the
// mock (priced by the bundled table) with a run cost bound its first
// rollout passes: no rollout starts after, those running finish and are
// stored, and the run ends saying why. Started again with a higher bound,
// it reuses what was stored and runs the rest.
func TestEvalStopsAtMaxRunCost(t *testing.T) {
	t.Parallel()
	skipShort(t)
	_, c := devtest.StartEvalflow(t)
	runsDir := t.TempDir()
	startWorker(t, c, wiring.Config{TaskQueue: "cost", RunsDir: runsDir, MaxRollouts: 4})

	const tasks = 6
	cfg := workflows.RunConfig{RunID: "cost-run", Taskset: "sample", Tasks: tasks, MaxConcurrent: 2, Model: "mock",
		MaxRunCostUSD: 1e-9}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	eval := func(cfg workflows.RunConfig) workflows.Result {
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: cfg.RunID, TaskQueue: "cost"}, wiring.EvalWorkflowName, workflows.EvalInput{Config: cfg})
		require.NoError(t, err)
		var res workflows.Result
		require.NoError(t, run.Get(ctx, &res))
		return res
	}
	res := eval(cfg)
	assert.Equal(t, workflows.StoppedMaxRunCost, res.Stopped)
	assert.GreaterOrEqual(t, res.Rollouts, int64(1))
	assert.LessOrEqual(t, res.Rollouts, int64(2), "only the window's rollouts ran")
	assert.Positive(t, res.CostUSD)

	store := storetest.Files(t, runsDir)
	recs := mustList(t, store, cfg.RunID)
	require.Len(t, recs, int(res.Rollouts), "every rollout started is stored")
	var cost float64
	for _, r := range recs {
		cost += r.CostUSD
	}
	assert.InDelta(t, cost, res.CostUSD, 1e-12)

	cfg.MaxRunCostUSD = 10
	more := eval(cfg)
	assert.Empty(t, more.Stopped)
	assert.Equal(t, int64(tasks), more.Rollouts)
	assert.Equal(t, res.Rollouts, more.Reused, "the stored rollouts are reused")
	require.Len(t, mustList(t, store, cfg.RunID), tasks)
}
