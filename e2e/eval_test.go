package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/logtest"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

// TestEvalEndToEnd runs 128 tasks with the built-in agent on the embedded
// server, kills the worker mid-run, finishes with a new one, reruns the same
// run id, and scans every history and log line for secrets.
func TestEvalEndToEnd(t *testing.T) {
	skipShort(t)
	_, c := devtest.StartEvalflow(t)
	upstream, badAuth := provider(t, mock.Config{Model: "mock-e2e", ErrorRate: 0.25})
	t.Setenv("E2E_PROVIDER_KEY", providerKey)
	runsDir := t.TempDir()
	runtime := newRecordingRuntime()
	logs := &logtest.Buffer{}
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
	store := storetest.Files(t, runsDir)
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
	requireStoredOnce(t, store, runtime, runID, tasks, stored)
	require.Equal(t, int64(tasks), res.Rollouts)
	require.Greater(t, res.MeanReward, 0.5, "the mock answers most sample tasks right")
	require.Less(t, res.MeanReward, 1.0, "the mock is wrong on a quarter of its answers")
	require.Zero(t, badAuth.Load(), "every upstream call carries the worker's key")
	require.GreaterOrEqual(t, res.Segments, 3, "128 rollouts at 50 per segment continue as new")
	run2 := rerunReusesAll(t, ctx, c, opts, cfg, runtime, store)

	// No secret in any history of either execution, nor in any log line.
	secrets := append(runtime.allSecrets(), providerKey)
	hs := append(histories(t, c, runID, run.GetRunID()), histories(t, c, runID, run2.GetRunID())...)
	require.GreaterOrEqual(t, len(hs), 4)
	requireNoSecret(t, "workflow history", hs, secrets)
	requireNoSecret(t, "worker log", []string{logs.String()}, secrets)
}

// requireStoredOnce checks a finished eval of tasks stored one record per
// task, each naming the model that answered and with its trace, and that
// no rollout stored before the kill ran again.
func requireStoredOnce(t *testing.T, store *results.Files, runtime *recordingRuntime, runID string, tasks int, stored map[string]bool) {
	t.Helper()
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
}

// rerunReusesAll starts the finished eval of cfg again under its run id:
// everything is reused, nothing runs; and again rerunning failures: there
// are none, so again nothing runs. It returns the first of those runs.
func rerunReusesAll(t *testing.T, ctx context.Context, c client.Client, opts client.StartWorkflowOptions, cfg workflows.RunConfig, runtime *recordingRuntime, store *results.Files) client.WorkflowRun {
	t.Helper()
	tasks := cfg.Tasks
	harnessRuns := runtime.total()
	again, err := c.ExecuteWorkflow(ctx, opts, wiring.EvalWorkflowName, workflows.EvalInput{Config: cfg})
	require.NoError(t, err)
	var res workflows.Result
	require.NoError(t, again.Get(ctx, &res))
	require.Equal(t, tasks, res.Reused)
	require.Equal(t, harnessRuns, runtime.total(), "a finished run reruns nothing")
	require.Len(t, mustList(t, store, cfg.RunID), int(tasks))

	retry := cfg
	retry.RetryFailed = true
	run, err := c.ExecuteWorkflow(ctx, opts, wiring.EvalWorkflowName, workflows.EvalInput{Config: retry})
	require.NoError(t, err)
	var retried workflows.Result
	require.NoError(t, run.Get(ctx, &retried))
	require.Equal(t, tasks, retried.Reused)
	require.Zero(t, retried.Rerun)
	require.Equal(t, harnessRuns, runtime.total(), "successes are kept when failures are rerun")
	return again
}

func mustList(t *testing.T, store *results.Files, runID string) []results.Record {
	t.Helper()
	recs, err := store.List(context.Background(), runID)
	require.NoError(t, err)
	return recs
}

const judgeKey = "sk-ant-e2e-judge-key-5e6f7a8b"

// TestEvalWithRolesAndFallbacks runs a judged eval through a worker with
// two named providers besides its own (the offline mock): the judge on an
// Anthropic-dialect provider whose key comes from the environment, and the
// policy on a provider that is down, falling back to the worker's own.
// Every turn names the provider that answered, and the judge's key is in
// no trace, history or log line.
func TestEvalWithRolesAndFallbacks(t *testing.T) {
	skipShort(t)
	_, c := devtest.StartEvalflow(t)
	dir := t.TempDir()
	tasks := filepath.Join(dir, "tasks.jsonl")
	require.NoError(t, os.WriteFile(tasks, []byte(`{"id": "mul", "prompt": "What is 37 * 17?", "answer": "629"}
{"id": "add", "prompt": "What is 1200 + 34?", "answer": "1234"}
`), 0o644))

	m, err := mock.New(mock.Config{ErrorRate: 0})
	require.NoError(t, err)
	var judged, badKey atomic.Int64
	judgeHost := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != judgeKey {
			badKey.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"type":"error","error":{"type":"authentication_error","message":"bad key"}}`)
			return
		}
		judged.Add(1)
		m.ServeHTTP(w, r)
	}))
	t.Cleanup(judgeHost.Close)
	down := "http://" + devtest.FreeAddr(t) + "/v1"

	t.Setenv(rollout.ProviderKeyEnv("judge-host"), judgeKey)
	named := []wiring.Provider{}
	for _, flag := range []string{"judge-host=anthropic:" + judgeHost.URL + "/v1", "down=" + down} {
		p, err := wiring.ParseProvider(flag)
		require.NoError(t, err)
		named = append(named, p)
	}
	var logs logtest.Buffer
	runsDir := t.TempDir()
	startWorker(t, c, wiring.Config{
		TaskQueue: "e2e-roles", RunsDir: runsDir, MaxRollouts: 2, Multiplex: 2,
		Providers: named,
		Mock:      mock.Config{ErrorRate: 0},
		Logger:    slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})

	const runID = "e2e-roles"
	cfg := workflows.RunConfig{RunID: runID, Taskset: tasks, Tasks: 2, MaxConcurrent: 2, Model: "mock", Rubric: "judge"}
	require.NoError(t, cfg.Harness.Roles.Set("policy=down,default"))
	require.NoError(t, cfg.Harness.Roles.Set("judge=judge-host:judge-model"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts := client.StartWorkflowOptions{ID: runID, TaskQueue: "e2e-roles", WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE}
	run, err := c.ExecuteWorkflow(ctx, opts, wiring.EvalWorkflowName, workflows.EvalInput{Config: cfg})
	require.NoError(t, err)
	var res workflows.Result
	require.NoError(t, run.Get(ctx, &res))
	require.Zero(t, res.Failed, "failed rollouts: %+v", res.FailedSamples)
	assert.Equal(t, 1.0, res.MeanReward)
	assert.Equal(t, int64(2), judged.Load(), "one judge call per rollout, on the judge's provider")
	assert.Zero(t, badKey.Load(), "the judge's provider got its key from the environment")

	store := storetest.Files(t, runsDir)
	var traces []string
	for _, r := range mustList(t, store, runID) {
		tr, err := store.Trace(ctx, runID, r.Key)
		require.NoError(t, err)
		require.NotEmpty(t, tr.Turns)
		for _, turn := range tr.Turns {
			assert.Equal(t, rollout.DefaultProvider, turn.Provider, "task %s", r.TaskID)
			assert.Equal(t, []string{"down"}, turn.FallbackFrom, "task %s", r.TaskID)
		}
		require.Len(t, tr.Judge, 1)
		assert.Equal(t, "judge-host", tr.Judge[0].Provider)
		assert.Equal(t, "anthropic", tr.Judge[0].Dialect)
		assert.Equal(t, "judge-model", tr.Judge[0].Request.Model)
		b, err := json.Marshal(tr)
		require.NoError(t, err)
		traces = append(traces, string(b))
	}
	data, err := os.ReadFile(filepath.Join(store.Dir(runID), "rollouts.jsonl"))
	require.NoError(t, err)
	traces = append(traces, string(data))
	requireNoSecret(t, "trace", traces, []string{judgeKey})
	requireNoSecret(t, "workflow history", histories(t, c, runID, run.GetRunID()), []string{judgeKey})
	requireNoSecret(t, "worker log", []string{logs.String()}, []string{judgeKey})
	assert.Contains(t, logs.String(), "model call fell back", "a fallback is logged, naming the providers")
}

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
