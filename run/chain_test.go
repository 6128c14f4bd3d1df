package run

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/evalflow/evalflow/workflows"
)

// segments is a run that continued as new: its executions by run id, the
// last one running.
type segments struct {
	client.Client
	runs map[string]*workflowpb.WorkflowExecutionInfo
	last string
}

func (s segments) DescribeWorkflowExecution(_ context.Context, _, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if runID == "" {
		runID = s.last
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: s.runs[runID]}, nil
}

// A run resumed while running, in its third segment: what its first
// segment stored was run by this chain of executions, not reused. The
// boundary is the first segment's start.
func TestAttachRunningRunStartsAtItsFirstSegment(t *testing.T) {
	first := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	info := func(runID string, start time.Time) *workflowpb.WorkflowExecutionInfo {
		return &workflowpb.WorkflowExecutionInfo{
			Execution: &commonpb.WorkflowExecution{WorkflowId: "r", RunId: runID}, FirstRunId: "seg-1",
			Type: &commonpb.WorkflowType{Name: workflows.EvalName}, Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
			StartTime: timestamppb.New(start),
		}
	}
	c := segments{last: "seg-3", runs: map[string]*workflowpb.WorkflowExecutionInfo{
		"seg-1": info("seg-1", first), "seg-3": info("seg-3", first.Add(2*time.Hour)),
	}}
	a, err := Attach(context.Background(), c, "q", workflows.RunConfig{RunID: "r"})
	require.NoError(t, err)
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, a.Prior)
	assert.Nil(t, a.Started, "a running run is left to run")
	assert.True(t, first.Equal(a.StartedAt), "StartedAt = %v, want the first segment's %v", a.StartedAt, first)

	r, err := Resume(context.Background(), c, ResumeInput{RunID: "r"})
	require.NoError(t, err)
	assert.True(t, first.Equal(r.StartedAt), "StartedAt = %v, want the first segment's %v", r.StartedAt, first)

	// A run that never continued as new: its own start.
	c.runs["seg-1"].Execution.RunId, c.last = "seg-1", "seg-1"
	a, err = Attach(context.Background(), c, "q", workflows.RunConfig{RunID: "r"})
	require.NoError(t, err)
	assert.True(t, first.Equal(a.StartedAt))
}
