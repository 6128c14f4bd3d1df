package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/viewer"
	"github.com/evalflow/evalflow/internal/viewer/viewertest"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

// TestViewerOnARealRun runs an evaluation whose provider refuses one task,
// and a three-epoch training run, on the embedded server with the built-in
// agent, then reads them in the run viewer in Chromium: the runs list shows
// them, the refused task's rollouts are marked failed with their reason, a
// transcript shows the agent's calculator call, and the training run's plot
// has one point per epoch. Neither the provider's key nor any rollout's
// secret reaches the viewer's pages or API.
func TestViewerOnARealRun(t *testing.T) {
	skipShort(t)
	b := viewertest.New(t, "viewer-e2e")
	_, c := devtest.StartEvalflow(t)

	// The provider: the mock behind a check of the worker's key, scripted
	// to refuse the sample task about Maria's stickers (task 1).
	script := filepath.Join(t.TempDir(), "script.jsonl")
	require.NoError(t, os.WriteFile(script, []byte(
		`{"match": "Maria had 79 stickers", "turns": [{"status": 400, "error": "this request is refused by the test"}]}`+"\n"), 0o644))
	upstream, _ := provider(t, mock.Config{Model: "mock-e2e", Script: script})
	t.Setenv("E2E_PROVIDER_KEY", providerKey)

	runsDir := t.TempDir()
	runtime := newRecordingRuntime()
	startWorker(t, c, wiring.Config{
		TaskQueue: "viewer", RunsDir: runsDir, BaseURL: upstream.URL + "/v1", APIKeyEnv: "E2E_PROVIDER_KEY",
		MaxRollouts: 8, Runtime: runtime,
	})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := func(id, name string, in any) client.WorkflowRun {
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "viewer",
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE}, name, in)
		require.NoError(t, err)
		return run
	}
	const evalID, trainID = "viewer-eval", "viewer-train"
	evalRun := start(evalID, wiring.EvalWorkflowName, workflows.EvalInput{Config: workflows.RunConfig{
		RunID: evalID, Taskset: "sample", Tasks: 4, RolloutsPerTask: 2, MaxConcurrent: 8, Model: "mock-e2e",
	}})
	trainRun := start(trainID, workflows.TrainName, workflows.TrainInput{
		Config: workflows.RunConfig{RunID: trainID, Taskset: "arithmetic?seed=3", Tasks: 2, RolloutsPerTask: 2,
			MaxConcurrent: 4, Model: "mock-e2e"},
		Train: workflows.TrainConfig{Epochs: 3},
	})
	var res workflows.Result
	require.NoError(t, evalRun.Get(ctx, &res))
	require.EqualValues(t, 8, res.Rollouts)
	require.EqualValues(t, 2, res.Failed, "the refused task's two rollouts fail: %+v", res.FailedSamples)
	var train workflows.TrainResult
	require.NoError(t, trainRun.Get(ctx, &train))

	store := storetest.Files(t, runsDir)
	failedKey := rollout.Key(evalID, 0, 1, 0)
	failed, ok, err := store.Get(ctx, evalID, failedKey)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, rollout.StatusError, failed.Status)

	// The viewer is told no secret: the store must not hold any.
	srv := httptest.NewServer(viewer.New(store, viewer.Options{TemporalUI: "http://127.0.0.1:8233"}))
	t.Cleanup(srv.Close)
	secrets := append(runtime.allSecrets(), providerKey)
	require.NotEmpty(t, runtime.allSecrets())
	var bodies []string
	for _, p := range []string{"/api/runs", "/api/runs/" + evalID, "/api/runs/" + trainID,
		"/api/runs/" + evalID + "/rollouts?limit=500", "/api/runs/" + trainID + "/rollouts?limit=500"} {
		bodies = append(bodies, httpGet(t, srv.URL+p))
	}
	for _, rec := range mustList(t, store, evalID) {
		bodies = append(bodies, httpGet(t, srv.URL+"/api/runs/"+evalID+"/rollout?key="+url.QueryEscape(rec.Key)))
	}
	requireNoSecret(t, "viewer API", bodies, secrets)
	requireNoSecret(t, "viewer page", browseRuns(t, b, srv.URL, evalID, trainID, failed), secrets)
}

// browseRuns reads the finished eval evalID, whose rollout failed failed,
// and the training run trainID in the viewer at viewerURL, and returns the
// pages of the failed rollout and of the training run.
func browseRuns(t *testing.T, b *viewertest.Browser, viewerURL, evalID, trainID string, failed results.Record) []string {
	t.Helper()
	failedKey := failed.Key
	// The runs list.
	b.Open(viewerURL + "/")
	b.WaitVisible(`tr[data-run="` + trainID + `"]`)
	row := b.Text(`tr[data-run="` + evalID + `"]`)
	for _, want := range []string{"eval", "finished", "mock-e2e", "sample"} {
		assert.Contains(t, row, want)
	}
	assert.Contains(t, b.Text(`tr[data-run="`+evalID+`"] td.failed`), "2")
	assert.Contains(t, b.Text(`tr[data-run="`+trainID+`"]`), "train")
	b.Shot("runs.png")

	// The eval: its failures, found through their error kind.
	b.GoTo("#/run/" + evalID)
	b.WaitVisible(`#error-kinds a`)
	b.Click(`#error-kinds a`)
	b.WaitVisible(`#rollouts-table[data-total="2"] tr.rollout-row.error[data-key="` + failedKey + `"]`)
	failedRow := b.Text(`tr[data-key="` + failedKey + `"]`)
	assert.Contains(t, failedRow, "failed")
	assert.Contains(t, failedRow, failed.ErrorKind)
	assert.Contains(t, failedRow, failed.Error)
	b.Shot("run-failed.png")

	// A rollout that worked: the agent's calculator call and its result.
	okKey := rollout.Key(evalID, 0, 0, 0)
	b.GoTo("#/rollout/" + url.PathEscape(evalID) + "/" + url.PathEscape(okKey))
	b.WaitVisible(`details.attempt[open] .tool-call[data-tool="calculator"]`)
	assert.Contains(t, b.Text(`details.attempt[open] .tool-call[data-tool="calculator"] .arguments`), "24")
	assert.Positive(t, b.Count(`details.attempt[open] .msg.tool`), "the tool's result is shown")
	assert.Contains(t, b.Text(`#temporal-link`), "Temporal UI")
	b.Shot("rollout.png")

	// The refused rollout: why it failed, and what the harness said.
	b.GoTo("#/rollout/" + url.PathEscape(evalID) + "/" + url.PathEscape(failedKey))
	b.WaitVisible(`#rollout-error`)
	assert.Contains(t, b.Text(`#rollout-error`), failed.ErrorKind)
	pages := []string{b.HTML()}
	b.Shot("rollout-failed.png")

	// The training run: one point per epoch.
	b.GoTo("#/run/" + trainID)
	b.WaitVisible(`#epoch-plot circle.epoch-point`)
	assert.Equal(t, 3, b.Count(`#epoch-plot circle.epoch-point`))
	pages = append(pages, b.HTML())
	b.Shot("train.png")
	return pages
}

func httpGet(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", u, body)
	return string(body)
}
