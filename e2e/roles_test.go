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
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

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
