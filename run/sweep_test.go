package run

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/workflows"
)

// oldNamespace refuses a start with a search attribute it lacks: it has
// only those of lacks' complement.
type oldNamespace struct {
	fakeTemporal
	lacks []string
	opts  []client.StartWorkflowOptions
}

func (o *oldNamespace) ExecuteWorkflow(ctx context.Context, opts client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	o.opts = append(o.opts, opts)
	for _, name := range o.lacks {
		if _, ok := opts.TypedSearchAttributes.GetKeyword(temporal.NewSearchAttributeKeyKeyword(name)); ok {
			return nil, serviceerror.NewInvalidArgument("search attribute " + name + " is not defined")
		}
	}
	return o.fakeTemporal.ExecuteWorkflow(ctx, opts, wf, args...)
}

func testSweep() workflows.SweepInput {
	return workflows.SweepInput{Config: workflows.RunConfig{RunID: "sw", Taskset: "sample", Model: "m1"}, Cells: []workflows.SweepCell{
		{Name: "agent@m1", HarnessName: "agent", Model: "m1"}, {Name: "agent@m2", HarnessName: "agent", Model: "m2"},
		{Name: "sh@m1", HarnessName: "sh", Model: "m1"}, {Name: "sh@m2", HarnessName: "sh", Model: "m2"},
	}}
}

// A sweep carries its run id, taskset, models and harnesses; a namespace
// set up before the harness attribute starts it with the others, and one
// without any of them starts it with none.
func TestStartSweepOnOlderNamespaces(t *testing.T) {
	in := testSweep()
	o := &oldNamespace{}
	s, err := StartSweep(context.Background(), o, "q", in)
	require.NoError(t, err)
	assert.False(t, s.NoSearchAttributes)
	require.Len(t, o.opts, 1)
	attrs := o.opts[0].TypedSearchAttributes
	for name, want := range map[string]string{
		workflows.AttrRunID: "sw", workflows.AttrTaskset: "sample", workflows.AttrModel: "m1,m2", workflows.AttrHarness: "agent,sh",
	} {
		v, _ := attrs.GetKeyword(temporal.NewSearchAttributeKeyKeyword(name))
		assert.Equal(t, want, v, name)
	}
	assert.Equal(t, "sw", o.opts[0].ID, "the sweep's workflow id is its run id")
	assert.Contains(t, o.opts[0].StaticSummary, "4 cells (agent@m1, agent@m2, sh@m1, sh@m2)")
	assert.Equal(t, []any{in}, o.started)

	o = &oldNamespace{lacks: []string{workflows.AttrHarness}}
	s, err = StartSweep(context.Background(), o, "q", in)
	require.NoError(t, err)
	assert.False(t, s.NoSearchAttributes, "the run id filter still finds it")
	require.Len(t, o.opts, 2)
	_, ok := o.opts[1].TypedSearchAttributes.GetKeyword(temporal.NewSearchAttributeKeyKeyword(workflows.AttrHarness))
	assert.False(t, ok)
	v, _ := o.opts[1].TypedSearchAttributes.GetKeyword(temporal.NewSearchAttributeKeyKeyword(workflows.AttrRunID))
	assert.Equal(t, "sw", v)

	o = &oldNamespace{lacks: []string{workflows.AttrRunID}}
	s, err = StartSweep(context.Background(), o, "q", in)
	require.NoError(t, err)
	assert.True(t, s.NoSearchAttributes)
	assert.Equal(t, 0, o.opts[2].TypedSearchAttributes.Size())
}

// A terminated sweep started again by resume is the same sweep: its cells
// and its configuration, failures rerun when asked.
func TestResumeSweepStartsEveryCellAgain(t *testing.T) {
	in := testSweep()
	c := &sweepHistory{fakeTemporal: fakeTemporal{kind: workflows.SweepName, status: enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED}, in: in}
	r, err := Resume(context.Background(), c, ResumeInput{RunID: "sw", TaskQueue: "q", RetryFailed: true})
	require.NoError(t, err)
	require.NotNil(t, r.Started)
	require.Len(t, c.started, 1)
	got, ok := c.started[0].(workflows.SweepInput)
	require.True(t, ok, "a sweep resumes as a sweep, not as an eval: %T", c.started[0])
	assert.Equal(t, in.Cells, got.Cells)
	assert.True(t, got.Config.RetryFailed)
	assert.Equal(t, "sw", got.Config.RunID)
}

// sweepHistory is fakeTemporal whose run was started with a sweep's input.
type sweepHistory struct {
	fakeTemporal
	in workflows.SweepInput
}

func (s *sweepHistory) GetWorkflowHistory(context.Context, string, string, bool, enumspb.HistoryEventFilterType) client.HistoryEventIterator {
	payloads, err := converter.GetDefaultDataConverter().ToPayloads(s.in)
	if err != nil {
		panic(err)
	}
	return &history{events: []*historypb.HistoryEvent{{
		Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
			WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{Input: payloads},
		},
	}}}
}

// cellProgress answers each cell's progress query; the sweep itself has
// none.
type cellProgress struct {
	sweepHistory
	cells map[string]workflows.Progress
}

type encoded struct{ v workflows.Progress }

func (e encoded) HasValue() bool { return true }

func (e encoded) Get(ptr any) error {
	*(ptr.(*workflows.Progress)) = e.v
	return nil
}

func (c *cellProgress) QueryWorkflow(_ context.Context, id, _, _ string, _ ...any) (converter.EncodedValue, error) {
	p, ok := c.cells[id]
	if !ok {
		return nil, serviceerror.NewNotFound("no such workflow")
	}
	return encoded{p}, nil
}

// A sweep's status is its cells' progress, summed; a cell not started yet
// adds nothing.
func TestSweepStatusSumsItsCells(t *testing.T) {
	in := testSweep()
	c := &cellProgress{sweepHistory: sweepHistory{fakeTemporal: fakeTemporal{kind: workflows.SweepName, status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}, in: in},
		cells: map[string]workflows.Progress{
			"sw:agent@m1": {Tasks: 3, Rollouts: 6, Done: 4, Failed: 1, Running: 2, MeanReward: 0.5},
			"sw:sh@m2":    {Tasks: 3, Rollouts: 6, Done: 2, Running: 1, MeanReward: 1},
		}}
	l, err := Status(context.Background(), c, "sw")
	require.NoError(t, err)
	require.NotNil(t, l.Progress, "%v", l.ProgressErr)
	assert.Equal(t, workflows.SweepName, l.Kind)
	assert.Equal(t, int64(12), l.Progress.Rollouts)
	assert.Equal(t, int64(6), l.Progress.Done)
	assert.Equal(t, int64(1), l.Progress.Failed)
	assert.Equal(t, 3, l.Progress.Running)
	assert.InDelta(t, (0.5*4+1*2)/6.0, l.Progress.MeanReward, 1e-9)
}

// describedCell is oldNamespace whose run is a sweep's cell: its previous
// execution carried prior, as the server describes it.
type describedCell struct {
	oldNamespace
	prior map[string]string
}

func (d *describedCell) DescribeWorkflowExecution(ctx context.Context, id, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	resp, err := d.oldNamespace.DescribeWorkflowExecution(ctx, id, runID)
	if err != nil {
		return nil, err
	}
	fields := map[string]*commonpb.Payload{}
	for name, v := range d.prior {
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		if err != nil {
			return nil, err
		}
		fields[name] = p
	}
	resp.WorkflowExecutionInfo.SearchAttributes = &commonpb.SearchAttributes{IndexedFields: fields}
	return resp, nil
}

// A cell resumed on its own keeps the sweep's run id and its harness, so
// the sweep's filter still finds it; its model and taskset come from its
// configuration. A namespace without the harness attribute starts it with
// the others; a run that was never a cell keeps its own id.
func TestResumeCellKeepsTheSweepsAttributes(t *testing.T) {
	cfg := workflows.RunConfig{RunID: "sw:sh@m2", Taskset: "sample", Model: "m2"}
	sweepAttrs := map[string]string{
		workflows.AttrRunID: "sw", workflows.AttrHarness: "sh", workflows.AttrModel: "m2", workflows.AttrTaskset: "sample",
	}
	keyword := func(attrs temporal.SearchAttributes, name string) string {
		v, _ := attrs.GetKeyword(temporal.NewSearchAttributeKeyKeyword(name))
		return v
	}
	cell := func(lacks ...string) *describedCell {
		return &describedCell{prior: sweepAttrs, oldNamespace: oldNamespace{lacks: lacks, fakeTemporal: fakeTemporal{
			kind: workflows.EvalName, status: enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, input: workflows.TrainInput{Config: cfg},
		}}}
	}

	c := cell()
	r, err := Resume(context.Background(), c, ResumeInput{RunID: cfg.RunID, TaskQueue: "q"})
	require.NoError(t, err)
	require.NotNil(t, r.Started)
	require.Len(t, c.opts, 1)
	assert.Equal(t, cfg.RunID, c.opts[0].ID, "the cell starts under its own id")
	for name, want := range map[string]string{
		workflows.AttrRunID: "sw", workflows.AttrHarness: "sh", workflows.AttrModel: "m2", workflows.AttrTaskset: "sample",
	} {
		assert.Equal(t, want, keyword(c.opts[0].TypedSearchAttributes, name), name)
	}

	c = cell(workflows.AttrHarness)
	r, err = Resume(context.Background(), c, ResumeInput{RunID: cfg.RunID, TaskQueue: "q"})
	require.NoError(t, err)
	assert.False(t, r.Started.NoSearchAttributes)
	require.Len(t, c.opts, 2)
	assert.Equal(t, "sw", keyword(c.opts[1].TypedSearchAttributes, workflows.AttrRunID), "the sweep's filter still finds it")
	_, ok := c.opts[1].TypedSearchAttributes.GetKeyword(temporal.NewSearchAttributeKeyKeyword(workflows.AttrHarness))
	assert.False(t, ok)

	// The same through the starter's rerun of a run id (Attach).
	c = cell()
	a, err := Attach(context.Background(), c, "q", cfg)
	require.NoError(t, err)
	require.NotNil(t, a.Started)
	require.Len(t, c.opts, 1)
	assert.Equal(t, "sw", keyword(c.opts[0].TypedSearchAttributes, workflows.AttrRunID))
	assert.Equal(t, "sh", keyword(c.opts[0].TypedSearchAttributes, workflows.AttrHarness))

	c = cell()
	c.prior = nil
	_, err = Resume(context.Background(), c, ResumeInput{RunID: cfg.RunID, TaskQueue: "q"})
	require.NoError(t, err)
	require.Len(t, c.opts, 1)
	assert.Equal(t, cfg.RunID, keyword(c.opts[0].TypedSearchAttributes, workflows.AttrRunID), "a run that was no cell is found by its own id")
	_, ok = c.opts[0].TypedSearchAttributes.GetKeyword(temporal.NewSearchAttributeKeyKeyword(workflows.AttrHarness))
	assert.False(t, ok)
}
