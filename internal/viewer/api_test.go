package viewer_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/viewer"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/rollout"
)

// serve starts a viewer over a fresh store holding the fixture's runs.
func serve(t *testing.T) *httptest.Server {
	t.Helper()
	store := storetest.Files(t, "")
	writeFixture(t, store)
	srv := httptest.NewServer(viewer.New(store, viewer.Options{
		TemporalUI: "http://127.0.0.1:8233/", Secrets: []string{providerKey},
	}))
	t.Cleanup(srv.Close)
	return srv
}

// get fetches path and returns its status and body.
func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// getJSON fetches path, requires a 200 and decodes the body into v.
func getJSON(t *testing.T, srv *httptest.Server, path string, v any) {
	t.Helper()
	status, body := get(t, srv, path)
	require.Equal(t, http.StatusOK, status, "GET %s: %s", path, body)
	require.NoError(t, json.Unmarshal([]byte(body), v), "GET %s", path)
}

func TestRunsListsEveryRun(t *testing.T) {
	srv := serve(t)
	var rows []viewer.RunRow
	getJSON(t, srv, "/api/runs", &rows)
	require.Len(t, rows, 2)
	byID := map[string]viewer.RunRow{}
	for _, r := range rows {
		byID[r.ID] = r
	}

	ev := byID[evalRun]
	assert.Equal(t, viewer.KindEval, ev.Kind)
	assert.Equal(t, viewer.StateFinished, ev.State)
	assert.Equal(t, "mock-1", ev.Model)
	assert.Equal(t, "arith", ev.Taskset)
	assert.Equal(t, 12, ev.Rollouts)
	assert.Equal(t, 8, ev.OK)
	assert.Equal(t, 4, ev.Failed)
	assert.InDelta(t, 7.5/12, ev.MeanReward, 1e-9)
	assert.Equal(t, t0.Add(-5e9), ev.StartedAt)

	tr := byID[trainRun]
	assert.Equal(t, viewer.KindTrain, tr.Kind)
	assert.Equal(t, viewer.StateRunning, tr.State, "a run without a summary is still running")
	assert.Equal(t, 10, tr.Rollouts)
	assert.Equal(t, "mock-1", tr.Model)
	assert.Equal(t, "arith", tr.Taskset, "from its finished epochs")
}

func TestRunFigures(t *testing.T) {
	srv := serve(t)
	var run viewer.Run
	getJSON(t, srv, "/api/runs/"+evalRun, &run)

	total := 0
	for _, b := range run.Histogram {
		total += b.Count
	}
	assert.Equal(t, 12, total, "every rollout is in one bin")
	require.Len(t, run.Histogram, 10)
	assert.Equal(t, 4, run.Histogram[0].Count, "the failed rollouts' zero rewards")
	assert.Equal(t, 1, run.Histogram[5].Count, "the 0.5")
	assert.Equal(t, 7, run.Histogram[9].Count, "the 1.0s, in the last bin")

	require.Len(t, run.Errors, 2)
	assert.Equal(t, rollout.KindHarnessExit, run.Errors[0].Kind)
	assert.EqualValues(t, 2, run.Errors[0].Count)
	assert.Equal(t, rollout.KindTimeout, run.Errors[1].Kind)
	require.Len(t, run.PassAtK, 2, "a finished run's pass@k is its summary's")
	assert.InDelta(t, 0.58, run.PassAtK[0].Value, 1e-9)
	assert.Equal(t, "http://127.0.0.1:8233/namespaces/default/workflows/"+evalRun, run.TemporalURL)
	assert.Empty(t, run.Epochs)
}

func TestTrainingRunHasOnePointPerEpoch(t *testing.T) {
	srv := serve(t)
	var run viewer.Run
	getJSON(t, srv, "/api/runs/"+trainRun, &run)
	require.Len(t, run.Epochs, 3)
	for i, e := range run.Epochs {
		assert.Equal(t, i, e.Epoch)
		assert.Equal(t, i < 2, e.Finished, "epoch %d", i)
	}
	assert.InDelta(t, 0.3, run.Epochs[0].MeanReward, 1e-9, "a finished epoch's recorded mean")
	assert.InDelta(t, 0.05, run.Epochs[0].StdReward, 1e-9)
	assert.InDelta(t, 0.8, run.Epochs[2].MeanReward, 1e-9, "a running epoch's mean so far")
	assert.InDelta(t, 0.05, run.Epochs[2].StdReward, 1e-9)
	assert.EqualValues(t, 2, run.Epochs[2].Rollouts)
	// Live pass@k at the default threshold of 1: no training reward reaches it.
	require.Len(t, run.PassAtK, 1)
	assert.Zero(t, run.PassAtK[0].Value)
}

func TestRolloutsFilterSortPage(t *testing.T) {
	srv := serve(t)
	page := func(q url.Values) viewer.Page {
		var p viewer.Page
		getJSON(t, srv, "/api/runs/"+evalRun+"/rollouts?"+q.Encode(), &p)
		return p
	}
	tests := []struct {
		query url.Values
		total int
		first string
	}{
		{url.Values{}, 12, rollout.Key(evalRun, 0, 0, 0)},
		{url.Values{"status": {"error"}}, 4, rollout.Key(evalRun, 0, 4, 0)},
		{url.Values{"error_kind": {"timeout"}}, 2, rollout.Key(evalRun, 0, 5, 0)},
		{url.Values{"status": {"ok"}, "min_reward": {"0.9"}}, 7, rollout.Key(evalRun, 0, 0, 0)},
		{url.Values{"min_reward": {"0.2"}, "max_reward": {"0.7"}}, 1, rollout.Key(evalRun, 0, 3, 1)},
		{url.Values{"sort": {"reward"}, "status": {"ok"}}, 8, rollout.Key(evalRun, 0, 3, 1)},
		{url.Values{"sort": {"-duration"}}, 12, rollout.Key(evalRun, 0, 5, 0)},
		{url.Values{"q": {"arith-2"}}, 2, rollout.Key(evalRun, 0, 2, 0)},
	}
	for _, tc := range tests {
		p := page(tc.query)
		assert.Equal(t, tc.total, p.Total, "rollouts?%s total", tc.query.Encode())
		if assert.NotEmpty(t, p.Rows, "rollouts?%s", tc.query.Encode()) {
			assert.Equal(t, tc.first, p.Rows[0].Key, "rollouts?%s first row", tc.query.Encode())
		}
	}

	p := page(url.Values{"offset": {"10"}, "limit": {"5"}})
	assert.Equal(t, 12, p.Total)
	require.Len(t, p.Rows, 2, "the last page holds the rest")
	assert.Equal(t, rollout.Key(evalRun, 0, 5, 0), p.Rows[0].Key)
	p = page(url.Values{"limit": {"100000"}})
	assert.Equal(t, 500, p.Limit, "a page is bounded")

	for _, q := range []string{"sort=secret", "offset=-1", "limit=x", "min_reward=nan"} {
		status, _ := get(t, srv, "/api/runs/"+evalRun+"/rollouts?"+q)
		assert.Equal(t, http.StatusBadRequest, status, "rollouts?%s", q)
	}
	status, _ := get(t, srv, "/api/runs/no-such-run/rollouts")
	assert.Equal(t, http.StatusNotFound, status)
}

func TestRolloutHasEveryAttempt(t *testing.T) {
	srv := serve(t)
	key := rollout.Key(evalRun, 0, 2, 0)
	var r viewer.Rollout
	getJSON(t, srv, "/api/runs/"+evalRun+"/rollout?key="+url.QueryEscape(key), &r)
	assert.Equal(t, key, r.Record.Key)
	require.Len(t, r.Attempts, 2)
	assert.Equal(t, 1, r.Attempts[0].N)
	assert.Contains(t, r.Attempts[0].Error, "502")
	assert.Equal(t, 2, r.Attempts[1].N)
	require.Len(t, r.Attempts[1].Turns, 2)
	calls := r.Attempts[1].Turns[0].Response.Message.ToolCalls
	require.Len(t, calls, 1)
	assert.Equal(t, "calculator", calls[0].Name)
	assert.Equal(t, "http://127.0.0.1:8233/namespaces/default/workflows/"+evalRun, r.TemporalURL)

	var tr viewer.Rollout
	getJSON(t, srv, "/api/runs/"+trainRun+"/rollout?key="+url.QueryEscape(rollout.Key(trainRun, 1, 0, 0)), &tr)
	assert.Equal(t, "http://127.0.0.1:8233/namespaces/default/workflows/"+url.PathEscape(trainRun+"/epoch-1"), tr.TemporalURL,
		"a training rollout links its epoch's workflow")

	status, _ := get(t, srv, "/api/runs/"+evalRun+"/rollout?key="+url.QueryEscape(rollout.Key(evalRun, 0, 99, 0)))
	assert.Equal(t, http.StatusNotFound, status)
}

// TestNoSecretServed: the fixture's traces hold the worker's provider key
// (in a harness's stderr) and a credential a harness printed (in its
// stdout); neither leaves the viewer, by the API or the page.
func TestNoSecretServed(t *testing.T) {
	srv := serve(t)
	paths := []string{"/", "/assets/app.js", "/assets/style.css", "/api/runs",
		"/api/runs/" + evalRun, "/api/runs/" + trainRun,
		"/api/runs/" + evalRun + "/rollouts?limit=500", "/api/runs/" + trainRun + "/rollouts?limit=500"}
	for _, key := range []string{rollout.Key(evalRun, 0, 0, 0), rollout.Key(evalRun, 0, 2, 0), rollout.Key(evalRun, 0, 4, 0)} {
		paths = append(paths, "/api/runs/"+evalRun+"/rollout?key="+url.QueryEscape(key))
	}
	for _, p := range paths {
		status, body := get(t, srv, p)
		require.Equal(t, http.StatusOK, status, p)
		assert.NotContains(t, body, providerKey, p)
		assert.NotContains(t, body, plantedKey, p)
		assert.NotContains(t, body, "planted0123456789", p)
	}

	var r viewer.Rollout
	getJSON(t, srv, "/api/runs/"+evalRun+"/rollout?key="+url.QueryEscape(rollout.Key(evalRun, 0, 4, 0)), &r)
	h := r.Attempts[0].Harness
	assert.Contains(t, h.Stdout, "OPENAI_API_KEY=[redacted]", "the rest of the output is still shown")
	assert.Contains(t, h.Stderr, "Traceback: boom")
	assert.True(t, strings.Contains(h.Stderr, "Authorization: [redacted]"), "stderr: %q", h.Stderr)
}

func TestPageIsTheEmbeddedApp(t *testing.T) {
	srv := serve(t)
	resp, err := http.Get(srv.URL + "/")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(b), `<script src="assets/app.js"`)
	assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'", "no inline script may run")

	status, js := get(t, srv, "/assets/app.js")
	assert.Equal(t, http.StatusOK, status)
	assert.NotContains(t, js, "innerHTML", "stored text is never parsed as HTML")
}

// TestLargeRunIsPaged: a run of 20,000 rollouts is served a page at a time,
// filtered and sorted on the server.
func TestLargeRunIsPaged(t *testing.T) {
	root := t.TempDir()
	const n = 20000
	var lines strings.Builder
	for i := range n {
		rec := results.Record{Key: rollout.Key("big", 0, int64(i), 0), RunID: "big", Index: int64(i), TaskID: fmt.Sprintf("t-%d", i),
			Status: rollout.StatusOK, Reward: float64(i%10) / 10, Attempt: 1, FinishedAt: t0}
		if i%100 == 7 {
			rec.Status, rec.ErrorKind, rec.Error, rec.Reward = rollout.StatusError, rollout.KindTimeout, "timed out", 0
		}
		b, err := json.Marshal(rec)
		require.NoError(t, err)
		lines.Write(append(b, '\n'))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root, "big"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "big", "rollouts.jsonl"), []byte(lines.String()), 0o644))
	store, err := results.Open(root)
	require.NoError(t, err)
	srv := httptest.NewServer(viewer.New(store, viewer.Options{}))
	t.Cleanup(srv.Close)

	status, body := get(t, srv, "/api/runs/big/rollouts?offset=19990&limit=50")
	require.Equal(t, http.StatusOK, status)
	var p viewer.Page
	require.NoError(t, json.Unmarshal([]byte(body), &p))
	assert.Equal(t, n, p.Total)
	require.Len(t, p.Rows, 10)
	assert.Equal(t, rollout.Key("big", 0, 19990, 0), p.Rows[0].Key)
	assert.Less(t, len(body), 10_000, "a page holds its rows only")

	getJSON(t, srv, "/api/runs/big/rollouts?status=error&sort=-key&limit=3", &p)
	assert.Equal(t, n/100, p.Total)
	require.Len(t, p.Rows, 3)
	assert.Equal(t, rollout.Key("big", 0, 19907, 0), p.Rows[0].Key)

	var run viewer.Run
	getJSON(t, srv, "/api/runs/big", &run)
	assert.Equal(t, n, run.Rollouts)
	assert.Equal(t, n/100, run.Failed)
}
