package main

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

// fakeTemporal answers DescribeWorkflowExecution with desc or err; queries
// fail.
type fakeTemporal struct {
	client.Client
	desc *workflowservice.DescribeWorkflowExecutionResponse
	err  error
}

func (f fakeTemporal) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return f.desc, f.err
}

func (f fakeTemporal) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	return nil, errors.New("no worker")
}

// storeWith makes a run store holding rollouts of runID with these rewards;
// a negative reward is a failed rollout.
func storeWith(t *testing.T, runID string, rewards ...float64) string {
	t.Helper()
	dir := t.TempDir()
	store := storetest.Files(t, dir)
	for i, r := range rewards {
		rec := results.Record{Key: rollout.Key(runID, 0, int64(i), 0), RunID: runID, Index: int64(i), Reward: r, Status: rollout.StatusOK, Attempt: 1}
		if r < 0 {
			rec.Reward, rec.Status, rec.ErrorKind = 0, rollout.StatusError, "timeout"
		}
		_, _, err := store.Put(context.Background(), rec, nil)
		require.NoError(t, err)
	}
	return dir
}

func TestPrintStatus(t *testing.T) {
	const server = "the Temporal server at 127.0.0.1:7233, namespace default"
	running := &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
	}}
	stored := storeWith(t, "r1", 1, 1, -1)
	for _, tt := range []struct {
		name    string
		c       client.Client
		runsDir string
		want    []string
		err     string
	}{
		{"on the server", fakeTemporal{desc: running}, stored, []string{"run r1: running (on " + server + ")"}, ""},
		{"another server: the store answers", fakeTemporal{err: serviceerror.NewNotFound("workflow not found")}, stored,
			[]string{"run r1: not on " + server, "3 rollouts (2 ok, 1 failed), mean reward 0.667"}, ""},
		{"no server: the store answers", nil, stored,
			[]string{"run r1: no answer from " + server, "3 rollouts (2 ok, 1 failed), mean reward 0.667"}, ""},
		{"nowhere", fakeTemporal{err: serviceerror.NewNotFound("workflow not found")}, t.TempDir(),
			nil, "run r1 is neither on " + server + " nor in the run store"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := printStatus(context.Background(), &out, tt.c, server, wiring.StoreConfig{RunsDir: tt.runsDir}, "r1")
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			for _, w := range tt.want {
				assert.Contains(t, out.String(), w)
			}
		})
	}
}

// A training run's epoch line: no empty "skipped []" once it has finished,
// nor an epoch past the last.
func TestTrainLine(t *testing.T) {
	for _, tc := range []struct {
		status enumspb.WorkflowExecutionStatus
		tp     workflows.TrainProgress
		want   string
	}{
		{enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, workflows.TrainProgress{Epoch: 3, Epochs: 3, Skipped: []int{}}, "finished: 3 of 3 epochs"},
		{enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, workflows.TrainProgress{Epoch: 1, Epochs: 3}, "epoch 1 of 3 epochs"},
		{enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, workflows.TrainProgress{Epoch: 2, Epochs: 0, Skipped: []int{0, 1}}, "epoch 2 of unbounded epochs; epochs 0, 1 reused from the run store"},
		{enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, workflows.TrainProgress{Epoch: 1, Epochs: 3}, "stopped in epoch 1 of 3 epochs"},
	} {
		got := trainLine(tc.status, tc.tp)
		assert.Equal(t, tc.want, got, "trainLine(%v, %+v)", tc.status, tc.tp)
		assert.NotContains(t, got, "[]")
	}
}
