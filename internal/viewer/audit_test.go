package viewer_test

import (
	"context"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/viewer"
	"github.com/evalflow/evalflow/internal/viewer/viewertest"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
	"github.com/evalflow/evalflow/workflows"
)

const auditRun = "audit-fixture"

// serveAudit serves a store holding a finished audit of two tasks: the
// oracle scores 1 on both, placeholders wins "hackable", reach-host reached
// nothing, and nothing scored on "sound".
func serveAudit(t *testing.T) *httptest.Server {
	t.Helper()
	store := storetest.Files(t, "")
	ctx := context.Background()
	sweep := workflows.SweepResult{RunID: auditRun, Taskset: "tasks", WallTime: "40s"}
	cells := []struct {
		name, harness string
		reward        map[string]float64
		did           string
	}{
		{"oracle@mock", "oracle", map[string]float64{"hackable": 1, "sound": 1}, ""},
		{"adversary-placeholders@mock", "adversary:placeholders", map[string]float64{"hackable": 1}, "audit: wrote a placeholder into /app/answer.txt\n"},
		{"adversary-reach-host@mock", "adversary:reach-host", nil, ""},
	}
	for _, c := range cells {
		runID := workflows.CellRunID(auditRun, c.name)
		for i, task := range []string{"hackable", "sound"} {
			key := rollout.Key(runID, 0, int64(i), 0)
			rec := results.Record{Key: key, RunID: runID, Index: int64(i), TaskID: task, Status: rollout.StatusOK, Reward: c.reward[task], Attempt: 1, FinishedAt: t0}
			tr := trace.Rollout{Key: key, TaskID: task, StartedAt: t0, EndedAt: t0}
			tr.Harness.Stdout = c.did
			_, _, err := store.Put(ctx, rec, &tr)
			require.NoError(t, err)
		}
		res := workflows.Result{RunID: runID, Taskset: "tasks", Model: "mock", Tasks: 2, Rollouts: 2}
		require.NoError(t, store.WriteSummary(ctx, runID, res))
		sweep.Cells = append(sweep.Cells, workflows.CellResult{Name: c.name, RunID: runID, HarnessName: c.harness, Model: "mock", Result: res})
	}
	require.NoError(t, store.WriteSummary(ctx, auditRun, sweep))
	srv := httptest.NewServer(viewer.New(store, viewer.Options{}))
	t.Cleanup(srv.Close)
	return srv
}

// An audit's run page holds what it found: the task an adversary won and
// what it did; a sound task is not there.
func TestAuditRunHasItsFindings(t *testing.T) {
	srv := serveAudit(t)
	var run viewer.Run
	getJSON(t, srv, "/api/runs/"+url.PathEscape(auditRun), &run)
	require.NotNil(t, run.Audit)
	assert.Equal(t, []string{"hackable", "sound"}, run.Audit.Tasks)
	require.Len(t, run.Audit.Findings, 1)
	f := run.Audit.Findings[0]
	assert.Equal(t, "hackable", f.Task)
	assert.Equal(t, "placeholders", f.Adversary)
	assert.Equal(t, 1.0, f.Reward)
	assert.Equal(t, []string{"wrote a placeholder into /app/answer.txt"}, f.Did)
	assert.Equal(t, map[string]float64{"hackable": 1, "sound": 1}, run.Audit.Oracle)

	var sweep viewer.Run
	getJSON(t, serveSweep(t, true), "/api/runs/"+url.PathEscape(sweepRun), &sweep)
	assert.Nil(t, sweep.Audit, "a sweep of other harnesses is no audit")
}

// TestBrowserAudit drives a real Chromium over an audit's run page: the
// findings table names the task and the adversary that won it.
func TestBrowserAudit(t *testing.T) {
	b := viewertest.New(t, "viewer-audit")
	srv := serveAudit(t)
	b.Open(srv.URL + "/#/run/" + url.PathEscape(auditRun))
	b.WaitVisible(`#findings tbody tr`)
	assert.Equal(t, 1, b.Count(`#findings tbody tr`))
	row := b.Text(`#findings tr[data-task="hackable"][data-adversary="placeholders"]`)
	assert.Contains(t, row, "wrote a placeholder into /app/answer.txt")
	assert.Contains(t, b.Text(`#audit .summary`), "1 of 2 tasks can be won without doing them")
	b.Shot("audit.png")
}
