package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

// TestEvalPerHarnessDialect runs a small eval with the built-in agent
// speaking each dialect, against the offline mock speaking another one, so
// every harness dialect goes through the translate arm end to end, and
// checks the traces hold the typed turns.
func TestEvalPerHarnessDialect(t *testing.T) {
	t.Parallel()
	skipShort(t)
	_, c := devtest.StartEvalflow(t)
	tests := []struct{ harness, upstream string }{
		{dialects.NameChat, dialects.NameAnthropic},
		{dialects.NameResponses, dialects.NameChat},
		{dialects.NameAnthropic, dialects.NameResponses},
	}
	for _, tt := range tests {
		t.Run(tt.harness+"→"+tt.upstream, func(t *testing.T) {
			runsDir := t.TempDir()
			queue := "e2e-" + tt.harness
			w, err := wiring.NewWorker(c, wiring.Config{
				TaskQueue:       queue,
				RunsDir:         runsDir,
				UpstreamDialect: tt.upstream, // no base URL: the mock, in this dialect
				MaxRollouts:     8,
				Multiplex:       8,
				DefaultHarness:  agentCommand,
				Logger:          slog.New(slog.DiscardHandler),
			})
			require.NoError(t, err)
			require.True(t, w.UsingMock)
			require.NoError(t, w.Start())
			defer w.Stop()

			const tasks = 8
			runID := "e2e-dialect-" + tt.harness
			cfg := workflows.RunConfig{
				RunID: runID, Taskset: "sample", Tasks: tasks, MaxConcurrent: 8, Model: "mock",
				Harness: rollout.HarnessConfig{Dialect: tt.harness},
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: runID, TaskQueue: queue},
				wiring.EvalWorkflowName, workflows.EvalInput{Config: cfg})
			require.NoError(t, err)
			var res workflows.Result
			require.NoError(t, run.Get(ctx, &res))
			require.Equal(t, int64(tasks), res.Rollouts)

			store := storetest.Files(t, runsDir)
			recs := mustList(t, store, runID)
			require.Len(t, recs, tasks)
			for _, rec := range recs {
				tr, err := store.Trace(ctx, runID, rec.Key)
				require.NoError(t, err)
				require.Zero(t, tr.Harness.ExitCode, "harness stderr: %s", tr.Harness.Stderr)
				require.NotEmpty(t, tr.Turns, rec.Key)
				for _, turn := range tr.Turns {
					assert.Equal(t, tt.harness, turn.Dialect, rec.Key)
					assert.Equal(t, 200, turn.Status, "%s: %s", rec.Key, turn.Error)
					assert.Equal(t, "mock", turn.Request.Model)
					assert.NotEmpty(t, turn.Response.FinishReason)
					assert.Positive(t, turn.Response.Usage.OutputTokens)
				}
				last := tr.Turns[len(tr.Turns)-1]
				assert.Equal(t, dialects.FinishStop, last.Response.FinishReason, rec.Key)
				assert.Contains(t, last.Response.Message.Text(), "The answer is", fmt.Sprint(rec.Key))
			}
			assert.Greater(t, res.MeanReward, 0.5, "the mock answers most sample tasks right")
		})
	}
}
