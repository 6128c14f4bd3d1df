package run

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/workflows"
)

func TestAttach(t *testing.T) {
	for _, tt := range []struct {
		name        string
		status      enumspb.WorkflowExecutionStatus
		retryFailed bool
		started     bool
		done        bool
	}{
		{"no such run: started", enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED, false, true, false},
		{"running: watched", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, false, false, false},
		{"finished: reported", enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, false, false, true},
		{"finished, failures rerun: started", enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, true, true, false},
		{"terminated: started again", enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, false, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &fakeTemporal{kind: workflows.EvalName, status: tt.status}
			cfg := workflows.RunConfig{RunID: "r", RetryFailed: tt.retryFailed}
			a, err := Attach(context.Background(), c, "q", cfg)
			require.NoError(t, err)
			assert.Equal(t, tt.status, a.Prior)
			assert.Equal(t, tt.started, a.Started != nil, "Attach(%v).Started", tt.status)
			assert.Equal(t, tt.done, a.Done(), "Attach(%v).Done()", tt.status)
			if tt.started {
				assert.Equal(t, []any{workflows.EvalInput{Config: cfg}}, c.started)
			} else {
				assert.Empty(t, c.started)
			}
		})
	}
}

func TestStaticSummary(t *testing.T) {
	assert.Equal(t, "eval of sample (4 tasks × 2) with model mock",
		staticSummary("eval", workflows.RunConfig{Taskset: "sample", Tasks: 4, RolloutsPerTask: 2, Model: "mock"}))
	assert.Equal(t, "training of data.jsonl (every task × 1) with model gpt",
		staticSummary("training", workflows.RunConfig{Taskset: "data.jsonl", Model: "gpt"}))
}

// An eval that ended past its --max-failures still has its summary printed:
// its result rides in the error.
func TestFailedResultCarriesTheResult(t *testing.T) {
	want := workflows.Result{Rollouts: 8, Failed: 3}
	err := fmt.Errorf("workflow: %w", temporal.NewNonRetryableApplicationError("3 of 8 rollouts failed", workflows.ErrRunFailed, nil, want))
	got, ok := FailedResult(err)
	require.True(t, ok)
	assert.Equal(t, want, got)

	_, ok = FailedResult(temporal.NewApplicationError("other", "SomethingElse"))
	assert.False(t, ok, "another failure is not a failure limit")
	_, ok = FailedResult(nil)
	assert.False(t, ok)
}

func TestURLs(t *testing.T) {
	assert.Empty(t, WorkflowURL("", "default", "r1"), "no UI known: no link")
	assert.Equal(t, "http://ui.example:8080/namespaces/team%20a/workflows/run-1", WorkflowURL("http://ui.example:8080/", "team a", "run-1"))
	assert.Equal(t, "http://ui.example:8080/namespaces/team%20a/workflows?query=EvalflowRunId%3D%22run-1%22", ListURL("http://ui.example:8080/", "team a", "run-1"))
}
