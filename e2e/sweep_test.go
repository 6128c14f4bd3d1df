package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/run"
	"github.com/evalflow/evalflow/workflows"
)

// zeroHarness answers 0 to every task, without a model call: a harness
// that scores other than the built-in agent.
var zeroHarness = rollout.HarnessConfig{Command: []string{"sh", "-c", `printf 0 > "$EVALFLOW_ANSWER_FILE"`}}

// sweep2x2 is a sweep of the built-in agent and the shell harness on two
// mock model names.
func sweep2x2(runID string) workflows.SweepInput {
	cfg := workflows.RunConfig{
		RunID: runID, Taskset: "sample", Tasks: 6, RolloutsPerTask: 2, MaxConcurrent: 2,
		Shuffle: true, Seed: 5, Model: "mock-a",
	}
	var cells []workflows.SweepCell
	for _, h := range []struct {
		name string
		cfg  rollout.HarnessConfig
	}{{"agent", rollout.HarnessConfig{}}, {"shell", zeroHarness}} {
		for _, m := range []string{"mock-a", "mock-b"} {
			cells = append(cells, workflows.SweepCell{Name: h.name + "@" + m, HarnessName: h.name, Harness: h.cfg, Model: m})
		}
	}
	return workflows.SweepInput{Config: cfg, Cells: cells}
}

// TestSweepEndToEnd runs a 2 harnesses × 2 models sweep on the embedded
// server with the offline mock, kills it midway (its worker stopped, its
// workflow terminated), resumes it as `starter resume` does, and checks
// that every cell finished every task once, in the same order, that no
// rollout stored before the kill ran again, that the Temporal UI's filters
// find a cell, and that the sweep's summary holds the four cells.
func TestSweepEndToEnd(t *testing.T) {
	t.Parallel()
	skipShort(t)
	_, c := devtest.StartEvalflow(t)
	runsDir := t.TempDir()
	runtime := newRecordingRuntime()
	newWorker := func() *wiring.Worker {
		w, err := wiring.NewWorker(c, wiring.Config{
			TaskQueue: "sweep", RunsDir: runsDir, MaxRollouts: 4, Runtime: runtime,
			DefaultHarness: agentCommand, Logger: slog.New(slog.DiscardHandler),
		})
		require.NoError(t, err)
		require.NoError(t, w.Start())
		return w
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	in := sweep2x2("e2e-sweep")
	first := newWorker()
	s, err := run.StartSweep(ctx, c, "sweep", in)
	require.NoError(t, err)
	require.False(t, s.NoSearchAttributes, "the embedded server has evalflow's attributes, the harness's too")

	store := storetest.Files(t, runsDir)
	storedNow := func() map[string]bool {
		keys := map[string]bool{}
		for _, cell := range in.Cells {
			for _, r := range mustList(t, store, workflows.CellRunID(in.Config.RunID, cell.Name)) {
				keys[r.Key] = true
			}
		}
		return keys
	}
	require.Eventually(t, func() bool { return len(storedNow()) >= 8 }, 3*time.Minute, 20*time.Millisecond, "rollouts stored before the kill")
	first.Stop()
	require.NoError(t, c.TerminateWorkflow(ctx, in.Config.RunID, "", "the starter was killed"))
	stored := storedNow()
	require.Less(t, len(stored), 4*12, "the kill came before the sweep ended")

	r, err := run.Resume(ctx, c, run.ResumeInput{RunID: in.Config.RunID, TaskQueue: "sweep"})
	require.NoError(t, err)
	require.Equal(t, workflows.SweepName, r.Kind)
	require.NotNil(t, r.Started, "a terminated sweep starts again")
	second := newWorker()
	defer second.Stop()
	var res workflows.SweepResult
	require.NoError(t, c.GetWorkflow(ctx, in.Config.RunID, "").Get(ctx, &res))

	requireCellsRanOnce(t, in, res, store, runtime, stored)

	// The Temporal UI's filter finds one cell by run id, harness and model.
	query := fmt.Sprintf("%s = %q AND %s = %q AND %s = %q AND ExecutionStatus = 'Completed'",
		workflows.AttrRunID, in.Config.RunID, workflows.AttrHarness, "shell", workflows.AttrModel, "mock-b")
	require.Eventually(t, func() bool {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err != nil || len(resp.GetExecutions()) != 1 {
			return false
		}
		return resp.GetExecutions()[0].GetExecution().GetWorkflowId() == workflows.CellRunID(in.Config.RunID, "shell@mock-b")
	}, time.Minute, 50*time.Millisecond, "query %s", query)

	sum, err := run.ReadSummary(ctx, store, in.Config.RunID)
	require.NoError(t, err)
	require.NotNil(t, sum.Sweep, "the sweep's summary is stored under its run id")
	assert.Len(t, sum.Sweep.Cells, 4)

	resumeFinishedSweep(t, ctx, c, in, runtime)
}

// requireCellsRanOnce checks a resumed sweep's result: every cell ran
// every task once, the same tasks, none stored before the kill ran again
// but each was reused in its own cell, and the harnesses scored apart.
func requireCellsRanOnce(t *testing.T, in workflows.SweepInput, res workflows.SweepResult, store *results.Files, runtime *recordingRuntime, stored map[string]bool) {
	t.Helper()
	require.Len(t, res.Cells, 4)
	var reused int64
	order := map[string][]int64{}
	for i, cell := range res.Cells {
		assert.Equal(t, in.Cells[i].Name, cell.Name)
		assert.Empty(t, cell.Error)
		assert.Equal(t, int64(12), cell.Result.Rollouts, "cell %s", cell.Name)
		assert.Zero(t, cell.Result.Failed, "cell %s: %+v", cell.Name, cell.Result.FailedSamples)
		assert.Equal(t, cell.Model, cell.Result.Model)
		reused += cell.Result.Reused
		recs := mustList(t, store, cell.RunID)
		require.Len(t, recs, 12, "cell %s: one stored rollout per task and sample", cell.Name)
		for _, rec := range recs {
			if rec.K == 0 {
				order[cell.Name] = append(order[cell.Name], rec.Index)
			}
		}
	}
	for name, idx := range order {
		assert.ElementsMatch(t, order["agent@mock-a"], idx, "cell %s runs the same tasks", name)
	}
	for key := range stored {
		assert.Equal(t, 1, runtime.count(key), "rollout %s finished before the kill but ran again", key)
	}
	assert.Equal(t, int64(len(stored)), reused, "every rollout stored before the kill is reused, in its own cell")
	for _, m := range []string{"mock-a", "mock-b"} {
		agent, shell := res.Cells[cellIndex(res, "agent@"+m)].Result, res.Cells[cellIndex(res, "shell@"+m)].Result
		assert.Greater(t, agent.MeanReward, shell.MeanReward, "the harnesses differ on %s", m)
	}
}

// resumeFinishedSweep resumes the finished sweep of in with its failures
// rerun (there are none: nothing runs), then one of its cells on its own,
// which the sweep's filter still finds.
func resumeFinishedSweep(t *testing.T, ctx context.Context, c client.Client, in workflows.SweepInput, runtime *recordingRuntime) {
	t.Helper()
	var res workflows.SweepResult
	// Resumed once more with its failures rerun: there are none, nothing runs.
	ran := runtime.total()
	r, err := run.Resume(ctx, c, run.ResumeInput{RunID: in.Config.RunID, TaskQueue: "sweep", RetryFailed: true})
	require.NoError(t, err)
	require.NotNil(t, r.Started, "a finished sweep reruns its failures when asked")
	require.NoError(t, c.GetWorkflow(ctx, in.Config.RunID, "").Get(ctx, &res))
	for _, cell := range res.Cells {
		assert.Equal(t, int64(12), cell.Result.Reused, "cell %s", cell.Name)
	}
	assert.Equal(t, ran, runtime.total(), "successes are kept")

	// A cell resumed on its own is still found by the sweep's filter.
	cellID := workflows.CellRunID(in.Config.RunID, "shell@mock-b")
	r, err = run.Resume(ctx, c, run.ResumeInput{RunID: cellID, TaskQueue: "sweep", RetryFailed: true})
	require.NoError(t, err)
	require.NotNil(t, r.Started, "a finished cell reruns its failures when asked")
	resumed := c.GetWorkflow(ctx, cellID, "")
	require.NoError(t, resumed.Get(ctx, nil))
	query := fmt.Sprintf("%s = %q AND %s = %q", workflows.AttrRunID, in.Config.RunID, workflows.AttrHarness, "shell")
	require.Eventually(t, func() bool {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err != nil {
			return false
		}
		for _, e := range resp.GetExecutions() {
			if e.GetExecution().GetRunId() == resumed.GetRunID() {
				return true
			}
		}
		return false
	}, time.Minute, 50*time.Millisecond, "query %s finds the cell resumed on its own", query)
}

func cellIndex(res workflows.SweepResult, name string) int {
	for i, c := range res.Cells {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// TestCaptureSweepHistories records a sweep's history for the replay test:
//
//	EVALFLOW_WRITE_HISTORY=$PWD/workflows/testdata/sweep go test ./e2e -run CaptureSweep
func TestCaptureSweepHistories(t *testing.T) {
	t.Parallel()
	skipUnlessCapturing(t)
	_, c := devtest.StartEvalflow(t)
	startWorker(t, c, wiring.Config{TaskQueue: "capture", MaxRollouts: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	in := sweep2x2("replay-sweep")
	in.Config.Tasks = 2
	_, err := run.StartSweep(ctx, c, "capture", in)
	require.NoError(t, err)
	wr := c.GetWorkflow(ctx, in.Config.RunID, "")
	var res workflows.SweepResult
	require.NoError(t, wr.Get(ctx, &res))
	require.Len(t, res.Cells, 4)
	writeHistory(t, "sweep_final.json", histories(t, c, in.Config.RunID, wr.GetRunID())[0])
	cell := c.GetWorkflow(ctx, workflows.CellRunID(in.Config.RunID, "shell@mock-b"), "")
	writeHistory(t, "cell_final.json", histories(t, c, workflows.CellRunID(in.Config.RunID, "shell@mock-b"), cell.GetRunID())[0])
}
