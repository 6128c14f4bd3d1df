package faults

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/workflows"
)

// TestManyInFlightOnTwoCores runs 1,000 rollouts on one worker with 64 and
// then 256 in flight. Admission is the only back-pressure: no step of an
// admitted rollout times out waiting for its own worker, no workflow task
// fails, and four times the rollouts in flight cost little throughput.
func TestManyInFlightOnTwoCores(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 rollouts twice")
	}
	srv := startServer(t)
	c := dial(t, srv.addr)
	defer c.Close()
	runs, queue := caseDir(t), "faults-load"
	startWorker(t, srv.addr, runs, queue, "--max-rollouts", "256", "--mock-latency", "0s")

	rate := map[int]float64{}
	for _, window := range []int{64, 256} {
		cfg := evalConfig("load-"+itoa(window), 1000, window)
		cfg.Limits.HeartbeatTimeout = workflows.DefaultHeartbeatTimeout
		started := time.Now()
		run := startEval(t, c, queue, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		var res workflows.Result
		require.NoError(t, run.Get(ctx, &res))
		cancel()
		wall := time.Since(started)
		rate[window] = 1000 / wall.Seconds()
		requireExactlyOnce(t, runs, cfg.RunID, 1000)

		ev := countEvents(t, c, cfg.RunID)
		assert.Zero(t, ev.scheduleToStart, "no step waited out a schedule-to-start timeout")
		assert.Zero(t, ev.workflowTaskFailed, "no workflow task failed (a panic or a deadlock): %v", ev.causes)
		assert.Zero(t, ev.activityTimedOut, "no activity timed out")
		figure(t, "1,000 rollouts at --max-concurrent %d on 2 cores: %.1f rollouts/s (%s), %d schedule-to-start timeouts, "+
			"%d activity timeouts, %d failed workflow tasks, %d history events",
			window, rate[window], wall.Round(time.Millisecond), ev.scheduleToStart, ev.activityTimedOut, ev.workflowTaskFailed, ev.total)
	}
	ratio := rate[256] / rate[64]
	figure(t, "throughput at 256 in flight is %.2f× that at 64", ratio)
	assert.GreaterOrEqual(t, ratio, 0.75, "256 in flight within 25%% of 64's throughput")
}

type eventCounts struct {
	total, scheduleToStart, activityTimedOut, workflowTaskFailed int
	// causes counts failed workflow tasks by cause.
	causes map[string]int
}

// countEvents reads every history of a run, following continue-as-new.
func countEvents(t *testing.T, c client.Client, workflowID string) eventCounts {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var n eventCounts
	desc, err := c.DescribeWorkflowExecution(ctx, workflowID, "")
	require.NoError(t, err)
	// The first execution of the chain: the run id the chain started with.
	runID := desc.GetWorkflowExecutionInfo().GetFirstRunId()
	for runID != "" {
		next := ""
		it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			require.NoError(t, err)
			n.total++
			n.add(e)
			if a := e.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				next = a.GetNewExecutionRunId()
			}
		}
		runID = next
	}
	return n
}

func (n *eventCounts) add(e *historypb.HistoryEvent) {
	switch e.GetEventType() {
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
		n.activityTimedOut++
		if e.GetActivityTaskTimedOutEventAttributes().GetFailure().GetTimeoutFailureInfo().GetTimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
			n.scheduleToStart++
		}
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
		n.workflowTaskFailed++
		if n.causes == nil {
			n.causes = map[string]int{}
		}
		a := e.GetWorkflowTaskFailedEventAttributes()
		n.causes[a.GetCause().String()+": "+a.GetFailure().GetMessage()]++
	}
}
