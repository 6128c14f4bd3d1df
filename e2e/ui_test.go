package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/pull"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

// failSecondSample fails every rollout's sample k = 1 as a harness exit.
type failSecondSample struct{ inner harness.Runtime }

func (f failSecondSample) Run(ctx context.Context, spec harness.Spec) (harness.Result, error) {
	if strings.HasSuffix(spec.Key, "/1") {
		return harness.Result{ExitCode: 3, Stderr: "told to fail"}, nil
	}
	return f.inner.Run(ctx, spec)
}

// TestTemporalUIShowsTheRun runs an eval and a training run whose second
// samples fail, and reads back through the Temporal API what the Web UI
// shows: each rollout activity's summary, the live figures in the memo and
// current details (saying how many failed), and the run's search
// attributes on its epochs and pull runs.
func TestTemporalUIShowsTheRun(t *testing.T) {
	t.Parallel()
	skipShort(t)
	_, c := devtest.StartEvalflow(t)
	rt := newRecordingRuntime()
	startWorker(t, c, wiring.Config{TaskQueue: "ui", MaxRollouts: 4, Runtime: failSecondSample{rt}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// An eval: 4 tasks × 2 samples, the 4 second samples fail.
	cfg := workflows.RunConfig{
		RunID: "ui-eval", Taskset: "sample", Tasks: 4, RolloutsPerTask: 2, MaxConcurrent: 3, Model: "mock",
		Harness: rollout.HarnessConfig{Command: shellHarness(filepath.Join(t.TempDir(), "never"))},
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: cfg.RunID, TaskQueue: "ui", TypedSearchAttributes: workflows.SearchAttributes(cfg),
	}, wiring.EvalWorkflowName, workflows.EvalInput{Config: cfg})
	require.NoError(t, err)
	var res workflows.Result
	require.NoError(t, run.Get(ctx, &res))
	require.Equal(t, int64(4), res.Failed)

	// Every rollout activity names its rollout.
	summaries := activitySummaries(t, c, cfg.RunID, run.GetRunID())
	require.Len(t, summaries[rollout.ActivityAcquire], 8)
	require.Len(t, summaries[rollout.ActivityRun], 8)
	for _, name := range []string{rollout.ActivityAcquire, rollout.ActivityExpose, rollout.ActivityRun} {
		for _, s := range summaries[name] {
			assert.Regexp(t, `^rollout ui-eval/0/\d+/[01] · task \d+ · epoch 0$`, s, "%s's summary", name)
		}
	}
	require.Empty(t, summaries[rollout.ActivityFinish], "the run's own activities name no rollout")

	// The memo holds the final figures, and says what failed.
	desc, err := c.DescribeWorkflowExecution(ctx, cfg.RunID, "")
	require.NoError(t, err)
	memo := desc.GetWorkflowExecutionInfo().GetMemo()
	var figs workflows.Figures
	decode(t, memo.GetFields()[workflows.MemoFigures], &figs)
	assert.Equal(t, workflows.Figures{
		Rollouts: 8, Done: 8, Failed: 4, Errors: []workflows.KindCount{{Kind: rollout.KindHarnessExit, Count: 4}},
		MeanReward: res.MeanReward, Finished: true,
	}, figs)
	var summary string
	decode(t, memo.GetFields()[workflows.MemoSummary], &summary)
	assert.Contains(t, summary, "4 failed (harness_exit 4)")
	assert.Equal(t, summary, currentDetails(t, c, cfg.RunID), "the current details show the same figures")

	// A training run: its epoch carries the run's search attributes and its
	// own figures.
	in := workflows.TrainInput{Config: cfg, Train: workflows.TrainConfig{Epochs: 1}}
	in.Config.RunID, in.Config.Tasks = "ui-train", 2
	trainRun, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: in.Config.RunID, TaskQueue: "ui", TypedSearchAttributes: workflows.SearchAttributes(in.Config),
	}, workflows.TrainName, in)
	require.NoError(t, err)
	require.NoError(t, trainRun.Get(ctx, nil))
	epochID := workflows.EpochID(in.Config.RunID, 0)
	epoch, err := c.DescribeWorkflowExecution(ctx, epochID, "")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		workflows.AttrRunID: "ui-train", workflows.AttrModel: "mock", workflows.AttrTaskset: "sample",
	}, runAttributes(t, epoch.GetWorkflowExecutionInfo().GetSearchAttributes()))
	decode(t, epoch.GetWorkflowExecutionInfo().GetMemo().GetFields()[workflows.MemoSummary], &summary)
	assert.Regexp(t, `^finished: 4 rollouts, 2 failed \(harness_exit 2\), mean reward \d\.\d{3}$`, summary)
	for _, s := range activitySummaries(t, c, epochID, epoch.GetWorkflowExecutionInfo().GetExecution().GetRunId())[rollout.ActivityRun] {
		assert.Regexp(t, `^rollout ui-train/0/\d+/[01] · task \d+ · epoch 0$`, s)
	}

	// One filter on the run id finds the run and its epoch.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		list, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: workflows.AttrRunID + ` = "ui-train"`,
		})
		require.NoError(ct, err)
		var ids []string
		for _, e := range list.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		assert.ElementsMatch(ct, []string{"ui-train", epochID}, ids)
	}, 30*time.Second, 50*time.Millisecond, "visibility lists the run and its epoch")

	// A pull run carries them too.
	in.Config.RunID = "ui-pull"
	p, err := pull.Start(ctx, c, "ui", in.Config, workflows.TrainConfig{})
	require.NoError(t, err)
	require.NoError(t, p.Close(ctx))
	pd, err := c.DescribeWorkflowExecution(ctx, "ui-pull", "")
	require.NoError(t, err)
	assert.Equal(t, "ui-pull", runAttributes(t, pd.GetWorkflowExecutionInfo().GetSearchAttributes())[workflows.AttrRunID])

	requireNoSecret(t, "memo and summaries", append(summaryTexts(summaries), summary), rt.allSecrets())
}

// activitySummaries are the summaries the activities a workflow run
// scheduled carry, by activity name.
func activitySummaries(t *testing.T, c client.Client, id, runID string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	it := c.GetWorkflowHistory(context.Background(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a == nil || ev.GetUserMetadata().GetSummary() == nil {
			continue
		}
		var s string
		decode(t, ev.GetUserMetadata().GetSummary(), &s)
		out[a.GetActivityType().GetName()] = append(out[a.GetActivityType().GetName()], s)
	}
	return out
}

func summaryTexts(m map[string][]string) []string {
	var out []string
	for _, s := range m {
		out = append(out, s...)
	}
	return out
}

// currentDetails are the details a workflow shows, as the UI reads them:
// through the built-in metadata query.
func currentDetails(t *testing.T, c client.Client, id string) string {
	t.Helper()
	v, err := c.QueryWorkflow(context.Background(), id, "", "__temporal_workflow_metadata")
	require.NoError(t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&md))
	return md.GetCurrentDetails()
}

// runAttributes are evalflow's keyword search attributes in attrs.
func runAttributes(t *testing.T, attrs *commonpb.SearchAttributes) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range []string{workflows.AttrRunID, workflows.AttrModel, workflows.AttrTaskset} {
		if p, ok := attrs.GetIndexedFields()[name]; ok {
			var v string
			decode(t, p, &v)
			out[name] = v
		}
	}
	return out
}

func decode(t *testing.T, p *commonpb.Payload, v any) {
	t.Helper()
	require.NotNil(t, p)
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, v))
}
