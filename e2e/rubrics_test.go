package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/workflows"
)

// checkScript is a command rubric: it passes an answer that holds the
// task's reference answer, and reports the answer's length as a metric.
const checkScript = `#!/bin/sh
want=$(sed -n 's/.*"answer":"\([^"]*\)".*/\1/p' "$EVALFLOW_TASK_FILE")
chars=$(wc -c < "$EVALFLOW_ANSWER_FILE")
if [ -n "$want" ] && grep -qF -- "$want" "$EVALFLOW_ANSWER_FILE"; then
  echo "{\"reward\": 1, \"chars\": $chars}"
else
  echo "{\"reward\": 0, \"chars\": $chars}"
fi
`

// TestEvalWithRubricPrograms runs JSONL tasks on the embedded server with
// the offline mock model, scored by a weighted sum of a text rubric, a
// command and the mock judging: every part is a named metric of the stored
// records and of rollouts.jsonl, and the judge's call is in the trace.
func TestEvalWithRubricPrograms(t *testing.T) {
	t.Parallel()
	skipShort(t)
	_, c := devtest.StartEvalflow(t)
	dir := t.TempDir()
	tasks := filepath.Join(dir, "tasks.jsonl")
	// The mock answers arithmetic right; the last task's reference is wrong,
	// so that every part fails it.
	require.NoError(t, os.WriteFile(tasks, []byte(`{"id": "mul", "prompt": "What is 37 * 17?", "answer": "629"}
{"id": "add", "prompt": "What is 1200 + 34?", "answer": "1234"}
{"id": "sub", "prompt": "What is 100 - 58?", "answer": "42"}
{"id": "wrong-reference", "prompt": "What is 6 * 7?", "answer": "43"}
`), 0o644))
	check := filepath.Join(dir, "check.sh")
	require.NoError(t, os.WriteFile(check, []byte(checkScript), 0o755))

	runsDir := t.TempDir()
	w, err := wiring.NewWorker(c, wiring.Config{
		TaskQueue: "e2e-rubrics", RunsDir: runsDir, MaxRollouts: 4, Multiplex: 4,
		DefaultHarness: agentCommand,
	})
	require.NoError(t, err)
	require.True(t, w.UsingMock, "no provider configured: the offline mock model")
	require.NoError(t, w.Start())
	defer w.Stop()

	const runID = "e2e-rubrics"
	spec := "numeric*0.4 + command:" + check + "*0.3 + judge*0.3"
	cfg := workflows.RunConfig{RunID: runID, Taskset: tasks, Tasks: 4, MaxConcurrent: 4, Model: "mock", Rubric: spec}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts := client.StartWorkflowOptions{ID: runID, TaskQueue: "e2e-rubrics", WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE}
	run, err := c.ExecuteWorkflow(ctx, opts, wiring.EvalWorkflowName, workflows.EvalInput{Config: cfg})
	require.NoError(t, err)
	var res workflows.Result
	require.NoError(t, run.Get(ctx, &res))
	require.Zero(t, res.Failed, "failed rollouts: %+v", res.FailedSamples)

	store := storetest.Files(t, runsDir)
	recs := mustList(t, store, runID)
	require.Len(t, recs, 4)
	for _, r := range recs {
		pass := 1.0
		if r.TaskID == "wrong-reference" {
			pass = 0
		}
		assert.InDelta(t, pass, r.Reward, 1e-9, "task %s reward", r.TaskID)
		require.Contains(t, r.Metrics, "command.chars", "task %s", r.TaskID)
		assert.Positive(t, r.Metrics["command.chars"], "task %s", r.TaskID)
		assert.Equal(t, map[string]float64{"numeric": pass, "command": pass, "judge": pass, "command.chars": r.Metrics["command.chars"]},
			r.Metrics, "task %s metrics", r.TaskID)

		tr, err := store.Trace(ctx, runID, r.Key)
		require.NoError(t, err)
		require.Len(t, tr.Judge, 1, "task %s: the judge's call is in the trace", r.TaskID)
		assert.Equal(t, "judge", tr.Judge[0].Route)
		assert.Contains(t, tr.Judge[0].Response.Message.Text(), "Score: ", "task %s", r.TaskID)
		assert.NotEmpty(t, tr.Turns, "task %s: the agent's own turns", r.TaskID)
	}

	// rollouts.jsonl carries the same metrics, line by line.
	f, err := os.Open(filepath.Join(store.Dir(runID), "rollouts.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	lines := 0
	for sc := bufio.NewScanner(f); sc.Scan(); lines++ {
		var line struct {
			TaskID  string             `json:"task_id"`
			Metrics map[string]float64 `json:"metrics"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
		assert.ElementsMatch(t, []string{"numeric", "command", "command.chars", "judge"}, keys(line.Metrics), "task %s", line.TaskID)
	}
	assert.Equal(t, 4, lines)
}

func keys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
