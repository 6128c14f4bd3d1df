package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/workflows"
)

const providerKey = "sk-e2e-provider-key-0f9a8b7c6d5e"

// provider is the upstream model: the offline mock behind a check of the
// worker's API key.
func provider(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	m, err := mock.New(mock.Config{Model: "mock-e2e", ErrorRate: 0.25})
	require.NoError(t, err)
	var badAuth atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+providerKey {
			badAuth.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"message":"bad key","type":"invalid_request_error"}}`)
			return
		}
		m.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &badAuth
}

// TestEvalEndToEnd runs 128 tasks with the built-in agent on the embedded
// server, kills the worker mid-run, finishes with a new one, reruns the same
// run id, and scans every history and log line for secrets.
func TestEvalEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run on the embedded server")
	}
	_, c := startServer(t)
	upstream, badAuth := provider(t)
	t.Setenv("E2E_PROVIDER_KEY", providerKey)
	runsDir := t.TempDir()
	runtime := newRecordingRuntime()
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	newWorker := func() *wiring.Worker {
		w, err := wiring.NewWorker(c, wiring.Config{
			TaskQueue:      "e2e",
			RunsDir:        runsDir,
			BaseURL:        upstream.URL + "/v1",
			APIKeyEnv:      "E2E_PROVIDER_KEY",
			MaxRollouts:    32,
			Multiplex:      32,
			Runtime:        runtime,
			DefaultHarness: agentCommand,
			Logger:         logger,
		})
		require.NoError(t, err)
		require.NoError(t, w.Start())
		return w
	}

	const runID, tasks = "e2e-run", 128
	cfg := workflows.RunConfig{
		RunID: runID, Taskset: "sample", Tasks: tasks, MaxConcurrent: 32, Model: "mock-e2e",
		Limits: workflows.Limits{ContinueAsNewAfter: 50},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	opts := client.StartWorkflowOptions{ID: runID, TaskQueue: "e2e", WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE}

	first := newWorker()
	run, err := c.ExecuteWorkflow(ctx, opts, wiring.EvalWorkflowName, workflows.EvalInput{Config: cfg})
	require.NoError(t, err)

	// Kill the worker once some rollouts are stored, as a crash would.
	store, err := results.Open(runsDir)
	require.NoError(t, err)
	var before int
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		recs, err := store.List(ctx, runID)
		require.NoError(c, err)
		before = len(recs)
		assert.GreaterOrEqual(c, before, 40)
	}, 5*time.Minute, 20*time.Millisecond, "rollouts stored before the kill")
	first.Stop()
	stored := map[string]bool{}
	for _, r := range mustList(t, store, runID) {
		stored[r.Key] = true
	}
	require.GreaterOrEqual(t, len(stored), before)

	second := newWorker()
	defer second.Stop()
	var res workflows.Result
	require.NoError(t, c.GetWorkflow(ctx, runID, "").Get(ctx, &res))

	require.Zero(t, res.Failed, "failed rollouts: %+v", res.FailedSamples)
	recs := mustList(t, store, runID)
	require.Len(t, recs, tasks, "exactly one stored rollout per task")
	seen := map[int64]bool{}
	for _, r := range recs {
		require.False(t, seen[r.Index], "task %d stored twice", r.Index)
		seen[r.Index] = true
		require.Equal(t, "mock-e2e", r.Model, "the record names the model that answered")
		require.FileExists(t, filepath.Join(store.Dir(runID), r.Trace), "the record's attempt trace")
	}
	for key := range stored {
		require.Equal(t, 1, runtime.count(key), "rollout %s finished before the kill but ran again", key)
	}
	require.Equal(t, int64(tasks), res.Rollouts)
	require.Greater(t, res.MeanReward, 0.5, "the mock answers most sample tasks right")
	require.Less(t, res.MeanReward, 1.0, "the mock is wrong on a quarter of its answers")
	require.Zero(t, badAuth.Load(), "every upstream call carries the worker's key")
	require.GreaterOrEqual(t, res.Segments, 3, "128 rollouts at 50 per segment continue as new")

	// The same run id again: everything is reused, nothing runs.
	harnessRuns := runtime.total()
	run2, err := c.ExecuteWorkflow(ctx, opts, wiring.EvalWorkflowName, workflows.EvalInput{Config: cfg})
	require.NoError(t, err)
	var res2 workflows.Result
	require.NoError(t, run2.Get(ctx, &res2))
	require.Equal(t, int64(tasks), res2.Reused)
	require.Equal(t, harnessRuns, runtime.total(), "a finished run reruns nothing")
	require.Len(t, mustList(t, store, runID), tasks)

	// Rerunning failures: there are none, so again nothing runs.
	retry := cfg
	retry.RetryFailed = true
	run3, err := c.ExecuteWorkflow(ctx, opts, wiring.EvalWorkflowName, workflows.EvalInput{Config: retry})
	require.NoError(t, err)
	var res3 workflows.Result
	require.NoError(t, run3.Get(ctx, &res3))
	require.Equal(t, int64(tasks), res3.Reused)
	require.Zero(t, res3.Rerun)
	require.Equal(t, harnessRuns, runtime.total(), "successes are kept when failures are rerun")

	// No secret in any history of either execution, nor in any log line.
	secrets := append(runtime.allSecrets(), providerKey)
	hs := append(histories(t, c, runID, run.GetRunID()), histories(t, c, runID, run2.GetRunID())...)
	require.GreaterOrEqual(t, len(hs), 4)
	requireNoSecret(t, "workflow history", hs, secrets)
	requireNoSecret(t, "worker log", []string{logs.String()}, secrets)
}

func mustList(t *testing.T, store *results.Files, runID string) []results.Record {
	t.Helper()
	recs, err := store.List(context.Background(), runID)
	require.NoError(t, err)
	return recs
}
