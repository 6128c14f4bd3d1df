package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/tasksets/tables"
	"github.com/evalflow/evalflow/workflows"
)

// problem is a row of the dataset fixtures, in columns a user maps.
type problem struct {
	UID      string `parquet:"uid"`
	Problem  string `parquet:"problem"`
	Solution string `parquet:"solution"`
}

func problems(n int) []problem {
	out := make([]problem, n)
	for i := range out {
		out[i] = problem{UID: fmt.Sprintf("p%02d", i), Problem: fmt.Sprintf("Compute %d * 3 + 1.", i), Solution: fmt.Sprint(i*3 + 1)}
	}
	return out
}

func writeProblemsParquet(t *testing.T, rows []problem) string {
	path := filepath.Join(t.TempDir(), "problems.parquet")
	f, err := os.Create(path)
	require.NoError(t, err)
	w := parquet.NewGenericWriter[problem](f, parquet.MaxRowsPerRowGroup(4))
	_, err = w.Write(rows)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, f.Close())
	return path
}

// writeProblemsHF writes rows as a Hugging Face save_to_disk directory.
func writeProblemsHF(t *testing.T, rows []problem) string {
	dir := t.TempDir()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "uid", Type: arrow.BinaryTypes.String},
		{Name: "problem", Type: arrow.BinaryTypes.String},
		{Name: "solution", Type: arrow.BinaryTypes.String},
	}, nil)
	const name = "data-00000-of-00001.arrow"
	f, err := os.Create(filepath.Join(dir, name))
	require.NoError(t, err)
	w := ipc.NewWriter(f, ipc.WithSchema(schema))
	for start := 0; start < len(rows); start += 5 {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for _, r := range rows[start:min(start+5, len(rows))] {
			b.Field(0).(*array.StringBuilder).Append(r.UID)
			b.Field(1).(*array.StringBuilder).Append(r.Problem)
			b.Field(2).(*array.StringBuilder).Append(r.Solution)
		}
		rec := b.NewRecord()
		require.NoError(t, w.Write(rec))
		rec.Release()
		b.Release()
	}
	require.NoError(t, w.Close())
	require.NoError(t, f.Close())
	state, err := json.Marshal(map[string]any{"_data_files": []map[string]string{{"filename": name}}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "state.json"), state, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dataset_info.json"), []byte(`{"features": {}}`), 0o600))
	return dir
}

// An eval over a Parquet file and a saved Hugging Face dataset, their
// columns mapped to prompt, answer and id: every row is a task, stored
// under its own id, scored against its own answer.
func TestEvalOverDatasets(t *testing.T) {
	t.Parallel()
	skipShort(t)
	_, c := devtest.StartEvalflow(t)
	runsDir := t.TempDir()
	startWorker(t, c, wiring.Config{
		TaskQueue: "e2e-datasets", RunsDir: runsDir, MaxRollouts: 8, Multiplex: 8,
		Mock:    mock.Config{ErrorRate: 0},
		Runtime: &local.Runtime{Dir: t.TempDir()},
	})
	store := storetest.Files(t, runsDir)

	rows := problems(12)
	fields := tables.Fields{Prompt: "problem", Answer: "solution", ID: "uid"}
	for kind, path := range map[string]string{"parquet": writeProblemsParquet(t, rows), "hf": writeProblemsHF(t, rows)} {
		t.Run(kind, func(t *testing.T) {
			runID := "datasets-" + kind
			cfg := workflows.RunConfig{
				RunID: runID, Taskset: tables.WithFields(path, fields), MaxConcurrent: 8, Model: "mock", Rubric: "numeric",
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			opts := client.StartWorkflowOptions{ID: runID, TaskQueue: "e2e-datasets", WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE}
			run, err := c.ExecuteWorkflow(ctx, opts, wiring.EvalWorkflowName, workflows.EvalInput{Config: cfg})
			require.NoError(t, err)
			var res workflows.Result
			require.NoError(t, run.Get(ctx, &res))
			assert.Equal(t, int64(len(rows)), res.Rollouts, "the whole dataset by default")
			assert.Equal(t, 1.0, res.MeanReward, "every answer checked against its own row's solution")
			recs := mustList(t, store, runID)
			require.Len(t, recs, len(rows))
			for _, r := range recs {
				assert.Equal(t, rows[r.Index].UID, r.TaskID, "task %d is row %d", r.Index, r.Index)
			}
		})
	}
}
