package viewer_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/viewer"
	"github.com/evalflow/evalflow/internal/viewer/viewertest"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

const sweepRun = "sweep-fixture"

// sweepCellNames are the fixture sweep's cells: two harnesses × two models.
var sweepCellNames = []string{"agent@mock-a", "agent@mock-b", "shell@mock-a", "shell@mock-b"}

// serveSweep serves a store holding a 2 × 2 sweep: each cell 3 tasks, the
// agent's cells scoring 1 on every task, the shell's on none, and the last
// cell's third task a harness exit. finished writes the sweep's summary;
// without it, the sweep is still running.
func serveSweep(t *testing.T, finished bool) *httptest.Server {
	t.Helper()
	store := storetest.Files(t, "")
	ctx := context.Background()
	sweep := workflows.SweepResult{RunID: sweepRun, Taskset: "arith", WallTime: "9s"}
	for ci, name := range sweepCellNames {
		runID := workflows.CellRunID(sweepRun, name)
		harness, model := name[:len(name)-len("@mock-a")], name[len(name)-len("mock-a"):]
		var res workflows.Result
		for i := range int64(3) {
			key := rollout.Key(runID, 0, i, 0)
			rec := results.Record{Key: key, RunID: runID, Index: i, TaskID: "arith", Status: rollout.StatusOK,
				Model: model, InputTokens: 100 * (ci + 1), OutputTokens: 10, CostUSD: 0.001, Attempt: 1,
				FinishedAt: t0.Add(time.Duration(i) * time.Second)}
			if harness == "agent" {
				rec.Reward = 1
			}
			if ci == 3 && i == 2 {
				rec.Status, rec.ErrorKind, rec.Error = rollout.StatusError, rollout.KindHarnessExit, "harness exited with code 3"
			}
			tr := toolTrace(key, "arith", "391")
			_, _, err := store.Put(ctx, rec, &tr)
			require.NoError(t, err)
		}
		res = workflows.Result{RunID: runID, Taskset: "arith", Model: model, Tasks: 3, Rollouts: 3, WallTime: "8s",
			PassAtK: []workflows.PassAt{{K: 1, Value: 0}}}
		if harness == "agent" {
			res.PassAtK[0].Value = 1
		}
		require.NoError(t, store.WriteSummary(ctx, runID, res))
		sweep.Cells = append(sweep.Cells, workflows.CellResult{Name: name, RunID: runID, HarnessName: harness, Model: model, Result: res})
	}
	if finished {
		require.NoError(t, store.WriteSummary(ctx, sweepRun, sweep))
	}
	srv := httptest.NewServer(viewer.New(store, viewer.Options{}))
	t.Cleanup(srv.Close)
	return srv
}

// A sweep's run page holds its cells side by side, each with its figures;
// the runs list shows it with its cells' totals. A sweep still running,
// with no summary yet, is found by its cells.
func TestSweepRunHasItsCells(t *testing.T) {
	for _, finished := range []bool{true, false} {
		srv := serveSweep(t, finished)
		var run viewer.Run
		getJSON(t, srv, "/api/runs/"+url.PathEscape(sweepRun), &run)
		assert.Equal(t, viewer.KindSweep, run.Kind)
		require.Len(t, run.Cells, 4, "finished %v", finished)
		assert.Equal(t, 12, run.Rollouts)
		assert.Equal(t, 1, run.Failed)
		assert.InDelta(t, 0.5, run.MeanReward, 1e-9)
		assert.InDelta(t, 0.012, run.CostUSD, 1e-9)
		for i, c := range run.Cells {
			assert.Equal(t, sweepCellNames[i], c.Name)
			assert.Equal(t, workflows.CellRunID(sweepRun, c.Name), c.RunID)
			assert.Equal(t, 3, c.Rollouts)
			assert.Equal(t, int64(300*(i+1)), c.InputTokens)
		}
		assert.Equal(t, []workflows.KindCount{{Kind: rollout.KindHarnessExit, Count: 1}}, run.Cells[3].Errors)
		assert.InDelta(t, 1, run.Cells[0].MeanReward, 1e-9)
		assert.InDelta(t, 0, run.Cells[2].MeanReward, 1e-9)
		if finished {
			assert.Equal(t, "shell", run.Cells[2].Harness)
			assert.Equal(t, "8s", run.Cells[2].WallTime)
			assert.Equal(t, viewer.StateFinished, run.State)
			var rows []viewer.RunRow
			getJSON(t, srv, "/api/runs", &rows)
			for _, r := range rows {
				if r.ID == sweepRun {
					assert.Equal(t, viewer.KindSweep, r.Kind)
					assert.Equal(t, 12, r.Rollouts, "the runs list sums the sweep's cells")
					assert.Equal(t, "mock-a, mock-b", r.Model)
				}
			}
		} else {
			assert.Equal(t, viewer.StateRunning, run.State)
		}
	}
}

// TestBrowserSweep drives a real Chromium over a 2 × 2 sweep: its run page
// lists the four cells as a table, each linking to its own run.
func TestBrowserSweep(t *testing.T) {
	b := viewertest.New(t, "viewer-sweep")
	srv := serveSweep(t, true)
	b.Open(srv.URL + "/#/run/" + url.PathEscape(sweepRun))
	b.WaitVisible(`#cells tbody tr`)
	assert.Equal(t, 4, b.Count(`#cells tbody tr`), "one row per cell")
	for i, name := range sweepCellNames {
		sel := `#cells tr[data-cell="` + name + `"]`
		row := b.Text(sel)
		assert.Contains(t, row, name)
		assert.Contains(t, b.Text(sel+` td.cost`), "$0.0030")
		assert.Contains(t, b.Text(sel+` td.tokens`), []string{"300/30", "600/30", "900/30", "1200/30"}[i])
	}
	assert.Contains(t, b.Text(`#cells tr[data-cell="agent@mock-a"] td.reward`), "1 ± 0")
	assert.Contains(t, b.Text(`#cells tr[data-cell="shell@mock-b"] td.errors`), "harness_exit 1")
	assert.Equal(t, "shell", b.Text(`#cells tr[data-cell="shell@mock-a"] td.harness`))
	b.Shot("sweep.png")

	b.Click(`#cells tr[data-cell="shell@mock-b"] a`)
	b.WaitVisible(`#rollouts-table tbody tr`)
	assert.Equal(t, 3, b.Count(`#rollouts-table tbody tr`), "a cell's own run page lists its rollouts")
}

// A sweep that has started but whose cells have stored no rollout yet has
// a page saying so, not a 404, and becomes the sweep's page with its first
// rollout; an id no run can have is still a 404 naming what is wrong.
func TestSweepBeforeAnyRolloutIsWaiting(t *testing.T) {
	store := storetest.Files(t, "")
	srv := httptest.NewServer(viewer.New(store, viewer.Options{TemporalUI: "http://127.0.0.1:8233"}))
	t.Cleanup(srv.Close)

	var run viewer.Run
	getJSON(t, srv, "/api/runs/"+url.PathEscape(sweepRun), &run)
	assert.Equal(t, sweepRun, run.ID)
	assert.Equal(t, viewer.StateWaiting, run.State)
	assert.Contains(t, run.Note, "no rollout stored yet")
	assert.Empty(t, run.Cells)
	assert.Equal(t, "http://127.0.0.1:8233/namespaces/default/workflows/"+sweepRun, run.TemporalURL, "the Temporal UI knows the sweep already")

	for _, bad := range []string{"no%20such%20run", "a%2Fb", strings.Repeat("x", 300)} {
		status, body := get(t, srv, "/api/runs/"+bad)
		assert.Equal(t, http.StatusNotFound, status, "GET /api/runs/%s: %s", bad, body)
		assert.Contains(t, body, "invalid run id", "GET /api/runs/%s", bad)
	}

	cellID := workflows.CellRunID(sweepRun, "agent@mock-a")
	key := rollout.Key(cellID, 0, 0, 0)
	tr := toolTrace(key, "arith", "391")
	_, _, err := store.Put(context.Background(), results.Record{Key: key, RunID: cellID, TaskID: "arith", Status: rollout.StatusOK,
		Model: "mock-a", Reward: 1, Attempt: 1, FinishedAt: t0}, &tr)
	require.NoError(t, err)
	run = viewer.Run{}
	getJSON(t, srv, "/api/runs/"+url.PathEscape(sweepRun), &run)
	assert.Equal(t, viewer.KindSweep, run.Kind, "its first rollout makes it a sweep")
	assert.Equal(t, viewer.StateRunning, run.State)
	require.Len(t, run.Cells, 1)
	assert.Equal(t, "agent@mock-a", run.Cells[0].Name)
	assert.Empty(t, run.Note)
}
