package workflows

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/evalflow/evalflow/rollout"
)

func sweepCells() []SweepCell {
	shell := rollout.HarnessConfig{Command: []string{"sh", "agent.sh"}}
	return []SweepCell{
		{Name: "agent@mock-a", HarnessName: "agent", Model: "mock-a"},
		{Name: "agent@mock-b", HarnessName: "agent", Model: "mock-b"},
		{Name: "sh-agent.sh@mock-a", HarnessName: "sh agent.sh", Model: "mock-a", Harness: shell},
		{Name: "sh-agent.sh@mock-b", HarnessName: "sh agent.sh", Model: "mock-b", Harness: shell},
	}
}

// A sweep runs every cell as its own eval: each cell every task once,
// under its own run id, with its own harness and model, and the same tasks
// in the same order as every other cell.
func TestSweepRunsEveryCellOverTheSameTasks(t *testing.T) {
	env := newEnv()
	env.RegisterWorkflowWithOptions(Eval, workflow.RegisterOptions{Name: EvalName})
	f := newFakeWorker(10, 0)
	var mu sync.Mutex
	seen := map[string][]rollout.Ref{} // by run id, in run order
	f.fail = func(ref rollout.Ref) error {
		mu.Lock()
		defer mu.Unlock()
		seen[ref.RunID] = append(seen[ref.RunID], ref)
		return nil
	}
	f.register(env, 0)
	cfg := testConfig(6, 2, 1)        // one at a time: each cell's order is its cursor's
	cfg.Limits.ContinueAsNewAfter = 5 // each cell continues as new twice
	env.ExecuteWorkflow(Sweep, SweepInput{Config: cfg, Cells: sweepCells()})

	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res SweepResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Len(t, res.Cells, 4)
	require.Len(t, f.runs, 4*6*2, "every cell runs each of its rollouts under its own key")
	for key, n := range f.runs {
		require.Equal(t, 1, n, "rollout %s ran %d times", key, n)
	}
	var order []int64
	for i, cell := range sweepCells() {
		cr := res.Cells[i]
		assert.Equal(t, cell.Name, cr.Name, "cells keep their order")
		assert.Equal(t, "run-1:"+cell.Name, cr.RunID)
		assert.Empty(t, cr.Error)
		assert.Equal(t, int64(12), cr.Result.Rollouts)
		assert.Equal(t, 3, cr.Result.Segments, "the cell's result is its last segment's")
		assert.Equal(t, cell.Model, cr.Result.Model)
		refs := seen[cr.RunID]
		require.Len(t, refs, 12, "cell %s", cell.Name)
		var cellOrder []int64
		for _, ref := range refs {
			assert.Equal(t, cell.Model, ref.Model)
			assert.Equal(t, cell.Harness.Command, ref.Harness.Command)
			if ref.K == 0 {
				cellOrder = append(cellOrder, ref.Index)
			}
		}
		if order == nil {
			order = cellOrder
		}
		assert.Equal(t, order, cellOrder, "cell %s visits the tasks in the sweep's order", cell.Name)
	}
	assert.NotEqual(t, []int64{0, 1, 2, 3, 4, 5}, order, "the seeded shuffle applies to every cell alike")
}

// A sweep started again reuses each cell's stored rollouts, cell by cell:
// a rollout stored under one cell's key is not another cell's.
func TestSweepResumedReusesEachCellsStoredRollouts(t *testing.T) {
	env := newEnv()
	env.RegisterWorkflowWithOptions(Eval, workflow.RegisterOptions{Name: EvalName})
	f := newFakeWorker(4, 0)
	cells := sweepCells()[:2]
	done := CellRunID("run-1", cells[0].Name)
	f.stored = map[string]rollout.Summary{}
	for i := range int64(4) {
		key := rollout.Key(done, 0, i, 0)
		f.stored[key] = rollout.Summary{Key: key, Index: i, Status: rollout.StatusOK, Reward: 1}
	}
	f.register(env, 0)
	env.ExecuteWorkflow(Sweep, SweepInput{Config: testConfig(4, 1, 2), Cells: cells})

	require.NoError(t, env.GetWorkflowError())
	var res SweepResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Equal(t, int64(4), res.Cells[0].Result.Reused, "the finished cell reuses all its rollouts")
	assert.Equal(t, int64(0), res.Cells[1].Result.Reused, "the other cell reuses none of them")
	assert.Len(t, f.runs, 4, "only the unfinished cell's rollouts run")
	for key := range f.runs {
		assert.Contains(t, key, CellRunID("run-1", cells[1].Name)+"/")
	}
}

// A cell that fails past its --max-failures does not stop the others; its
// result and error are in its cell.
func TestSweepCellFailureKeepsTheOthers(t *testing.T) {
	env := newEnv()
	env.RegisterWorkflowWithOptions(Eval, workflow.RegisterOptions{Name: EvalName})
	f := newFakeWorker(4, 0)
	f.taskFails = func(ref rollout.Ref) bool { return ref.Model == "mock-b" }
	f.register(env, 0)
	cfg := testConfig(4, 1, 2)
	cfg.MaxFailures = 1
	env.ExecuteWorkflow(Sweep, SweepInput{Config: cfg, Cells: sweepCells()[:2]})

	require.NoError(t, env.GetWorkflowError())
	var res SweepResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Empty(t, res.Cells[0].Error)
	assert.Equal(t, int64(4), res.Cells[0].Result.OK)
	assert.Contains(t, res.Cells[1].Error, "--max-failures")
	assert.Equal(t, int64(4), res.Cells[1].Result.Failed, "a failed cell keeps its figures")
}

func TestSweepRefusesBadCells(t *testing.T) {
	for name, cells := range map[string][]SweepCell{
		"none":      nil,
		"duplicate": {sweepCells()[0], sweepCells()[0]},
		"no model":  {{Name: "agent@"}},
	} {
		t.Run(name, func(t *testing.T) {
			env := newEnv()
			env.ExecuteWorkflow(Sweep, SweepInput{Config: testConfig(4, 1, 2), Cells: cells})
			require.Error(t, env.GetWorkflowError())
		})
	}
}
