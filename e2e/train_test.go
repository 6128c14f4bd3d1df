package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/pull"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
	"github.com/evalflow/evalflow/workflows"
)

// trainCluster is an embedded server with several workers sharing one store.
type trainCluster struct {
	c       client.Client
	runsDir string
	store   *results.Files
	runtime *recordingRuntime
	queue   string
}

func newTrainCluster(t *testing.T, workers int) *trainCluster {
	t.Helper()
	_, c := devtest.StartEvalflow(t)
	tc := &trainCluster{c: c, runsDir: t.TempDir(), runtime: newRecordingRuntime(), queue: "train"}
	var err error
	tc.store, err = results.Open(tc.runsDir)
	require.NoError(t, err)
	for range workers {
		startWorker(t, c, wiring.Config{TaskQueue: tc.queue, RunsDir: tc.runsDir, MaxRollouts: 16, Runtime: tc.runtime})
	}
	return tc
}

func (tc *trainCluster) start(t *testing.T, ctx context.Context, in workflows.TrainInput) client.WorkflowRun {
	t.Helper()
	run, err := tc.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: in.Config.RunID, TaskQueue: tc.queue, WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes: workflows.SearchAttributes(in.Config),
	}, workflows.TrainName, in)
	require.NoError(t, err)
	return run
}

// shellHarness answers every task with a fixed number, or fails while the
// file broken exists.
func shellHarness(broken string) []string {
	return []string{"sh", "-c", fmt.Sprintf(`test ! -e %q || exit 3; echo 7 > "$EVALFLOW_ANSWER_FILE"`, broken)}
}

func trainConfig(runID string, broken string) workflows.TrainInput {
	return workflows.TrainInput{
		Config: workflows.RunConfig{
			RunID: runID, Taskset: "sample", Tasks: 50, RolloutsPerTask: 4, MaxConcurrent: 24,
			Seed: 7, Shuffle: true, Model: "mock",
			Harness: rollout.HarnessConfig{Command: shellHarness(broken)},
			Limits:  workflows.Limits{ContinueAsNewAfter: 120},
		},
		Train: workflows.TrainConfig{Epochs: 2},
	}
}

// TestTrainResumesAKilledRun runs 2 epochs × 50 tasks × groups of 4 on three
// workers, terminates the run during epoch 1 (the second), resumes it, and
// checks that every (epoch, task, k) is stored once and nothing finished
// ran again.
func TestTrainResumesAKilledRun(t *testing.T) {
	t.Parallel()
	skipShort(t)
	tc := newTrainCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	in := trainConfig("train-kill", filepath.Join(t.TempDir(), "never"))
	tc.start(t, ctx, in)

	// Terminate once the second epoch has stored some rollouts.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		recs, err := tc.store.List(ctx, "train-kill")
		require.NoError(c, err)
		assert.GreaterOrEqual(c, countEpoch(recs, 1), 40)
	}, 5*time.Minute, 20*time.Millisecond, "rollouts of epoch 1 stored before the kill")
	require.NoError(t, tc.c.TerminateWorkflow(ctx, "train-kill", "", "test: kill mid-epoch"))
	before := map[string]bool{}
	for _, r := range mustList(t, tc.store, "train-kill") {
		before[r.Key] = true
	}

	run := tc.start(t, ctx, in)
	var res workflows.TrainResult
	require.NoError(t, run.Get(ctx, &res))

	recs := mustList(t, tc.store, "train-kill")
	require.Len(t, recs, 400, "2 epochs × 50 tasks × 4")
	perEpoch := map[int]map[int64]int{0: {}, 1: {}}
	for _, r := range recs {
		perEpoch[r.Epoch][r.Index]++
	}
	for epoch, tasks := range perEpoch {
		require.Len(t, tasks, 50, "epoch %d covers 50 distinct tasks", epoch)
		for index, n := range tasks {
			require.Equal(t, 4, n, "epoch %d task %d has a group of 4", epoch, index)
		}
	}
	for key := range before {
		require.Equal(t, 1, tc.runtime.count(key), "rollout %s finished before the kill but ran again", key)
	}
	require.Equal(t, []int{0}, res.Skipped, "epoch 0 finished before the kill and is not rerun")
	require.Len(t, res.Epochs, 1)
	require.Equal(t, int64(200), res.Epochs[0].Run.Rollouts)
	require.Equal(t, int64(200)-res.Epochs[0].Ran, res.Epochs[0].Run.Reused)
	require.GreaterOrEqual(t, res.Epochs[0].Run.Reused, int64(40))
	require.Equal(t, int64(50), res.Epochs[0].Groups, "every task's group is scored")
	epochs, err := tc.store.Epochs(ctx, "train-kill")
	require.NoError(t, err)
	require.Equal(t, []int{0, 1}, epochs)

	// No rollout secret in the run's or its epochs' histories.
	hs := histories(t, tc.c, "train-kill", run.GetRunID())
	for epoch := range 2 {
		id := workflows.EpochID("train-kill", epoch)
		hs = append(hs, histories(t, tc.c, id, tc.c.GetWorkflow(ctx, id, "").GetRunID())...)
	}
	requireNoSecret(t, "training history", hs, tc.runtime.allSecrets())
}

// TestTrainFailsPastMaxFailuresThenResumes breaks the harness, sees the
// epoch fail with its reason, fixes it and resumes.
func TestTrainFailsPastMaxFailuresThenResumes(t *testing.T) {
	t.Parallel()
	skipShort(t)
	tc := newTrainCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	broken := filepath.Join(t.TempDir(), "broken")
	require.NoError(t, os.WriteFile(broken, nil, 0o644))
	in := trainConfig("train-fail", broken)
	in.Config.Tasks, in.Config.RolloutsPerTask, in.Train.Epochs, in.Train.MaxFailures = 10, 2, 1, 3

	err := tc.start(t, ctx, in).Get(ctx, nil)
	require.Error(t, err)
	require.Contains(t, err.Error(), "more than --max-failures 3")
	require.Contains(t, err.Error(), "harness_exit")

	require.NoError(t, os.Remove(broken))
	var res workflows.TrainResult
	require.NoError(t, tc.start(t, ctx, in).Get(ctx, &res))
	require.Len(t, res.Epochs, 1)
	require.Zero(t, res.Epochs[0].Run.Failed)
	recs := mustList(t, tc.store, "train-fail")
	require.Len(t, recs, 20)
	for _, r := range recs {
		require.Equal(t, rollout.StatusOK, r.Status, "failed rollouts are rerun on resume: %s", r.Key)
	}
}

// TestPullersGetDisjointPositions has two trainers pull 100 positions at
// once, run groups on some, and get a never-sampled position refused.
func TestPullersGetDisjointPositions(t *testing.T) {
	t.Parallel()
	skipShort(t)
	tc := newTrainCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	in := trainConfig("pull-run", filepath.Join(t.TempDir(), "never"))
	in.Train.Epochs = 0
	p, err := pull.Start(ctx, tc.c, tc.queue, in.Config, in.Train, pull.WithTraces(results.TraceJSON{Store: tc.store}))
	require.NoError(t, err)

	var mu sync.Mutex
	positions := map[int64]int{}
	var refs []workflows.TaskRef
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				ref, err := p.Sample(ctx)
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				positions[ref.Position]++
				refs = append(refs, ref)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Len(t, positions, 100, "100 samples, 100 distinct positions")
	for pos := range int64(100) {
		require.Equal(t, 1, positions[pos], "position %d", pos)
	}

	res, err := p.RunGroup(ctx, refs[0], 3)
	require.NoError(t, err)
	require.Len(t, res.Rollouts, 3)
	require.Len(t, res.Traces, 3)
	for i, s := range res.Rollouts {
		require.Equal(t, rollout.StatusOK, s.Status)
		var tr trace.Rollout
		require.NoError(t, json.Unmarshal(res.Traces[i], &tr), "the trace comes with the group")
		require.Equal(t, s.Key, tr.Key)
		require.Len(t, tr.Turns, s.Turns)
	}
	require.Len(t, res.Group.Advantages, 3)

	_, err = p.RunGroup(ctx, workflows.TaskRef{Position: 1000}, 2)
	require.ErrorContains(t, err, "never sampled")
	require.NoError(t, p.Close(ctx))
}

// countEpoch counts the records of one epoch.
func countEpoch(recs []results.Record, epoch int) int {
	n := 0
	for _, r := range recs {
		if r.Epoch == epoch {
			n++
		}
	}
	return n
}
