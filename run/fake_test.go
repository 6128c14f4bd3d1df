package run

import (
	"context"
	"errors"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/evalflow/evalflow/workflows"
)

// fakeTemporal knows at most one run: its kind, status and start input.
// It records the workflows started; queries fail.
type fakeTemporal struct {
	client.Client
	kind    string
	status  enumspb.WorkflowExecutionStatus // unspecified: no such run
	input   workflows.TrainInput
	started []any
}

func (f *fakeTemporal) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if f.status == enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED {
		return nil, serviceerror.NewNotFound("workflow not found")
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Type: &commonpb.WorkflowType{Name: f.kind}, Status: f.status,
	}}, nil
}

func (f *fakeTemporal) ExecuteWorkflow(_ context.Context, _ client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
	f.started = append(f.started, args[0])
	return nil, nil
}

func (f *fakeTemporal) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	return nil, errors.New("no worker")
}

func (f *fakeTemporal) GetWorkflowHistory(context.Context, string, string, bool, enumspb.HistoryEventFilterType) client.HistoryEventIterator {
	payloads, err := converter.GetDefaultDataConverter().ToPayloads(f.input)
	if err != nil {
		panic(err)
	}
	return &history{events: []*historypb.HistoryEvent{{
		Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
			WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{Input: payloads},
		},
	}}}
}

type history struct{ events []*historypb.HistoryEvent }

func (h *history) HasNext() bool { return len(h.events) > 0 }

func (h *history) Next() (*historypb.HistoryEvent, error) {
	ev := h.events[0]
	h.events = h.events[1:]
	return ev, nil
}
