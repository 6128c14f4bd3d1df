package activities_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/activities"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/tasksets"
)

// verifiedRig is a rig running the bundled Harbor tasks in the local
// runtime, on a worker that holds one rollout at a time.
func verifiedRig(t *testing.T) (*rig, string) {
	t.Helper()
	r := newRig(t, nil)
	workDir := t.TempDir()
	r.acts.Runtime = &local.Runtime{Dir: workDir}
	r.acts.WorkDir = workDir
	r.acts.Capacity = activities.NewCapacity(1)
	return r, workDir
}

// harborRef is the rollout of the bundled task named id, run by the oracle.
func harborRef(t *testing.T, id string) rollout.Ref {
	t.Helper()
	ts, err := tasksets.HarborSample()
	require.NoError(t, err)
	for i := range ts.Len() {
		task, err := ts.Task(context.Background(), i)
		require.NoError(t, err)
		if task.ID == id {
			return rollout.Ref{
				RunID: "run", Index: i, Taskset: tasksets.HarborSampleName, Model: "mock", Rubric: "exact",
				Harness: rollout.HarnessConfig{Oracle: true, Timeout: time.Minute}, Attempt: 1,
			}
		}
	}
	t.Fatalf("no bundled task %s", id)
	return rollout.Ref{}
}

// runForVerify runs Acquire and Run as the workflow does before Verify.
func (r *rig) runForVerify(t *testing.T, ref rollout.Ref, within time.Duration) rollout.Summary {
	t.Helper()
	val, err := r.env.ExecuteActivity(r.acts.Acquire, rollout.AcquireInput{Rollout: ref})
	require.NoError(t, err)
	var slot rollout.AcquireResult
	require.NoError(t, val.Get(&slot))
	val, err = r.env.ExecuteActivity(r.acts.Expose, rollout.ExposeInput{Key: ref.Key()})
	require.NoError(t, err)
	var exp rollout.ExposeResult
	require.NoError(t, val.Get(&exp))
	val, err = r.env.ExecuteActivity(r.acts.Run, rollout.RunInput{Rollout: ref, BaseURL: exp.BaseURL, VerifyWithin: within})
	require.NoError(t, err)
	var s rollout.Summary
	require.NoError(t, val.Get(&s))
	return s
}

// capacityFree reports whether the worker's one unit of capacity is free.
func capacityFree(c *activities.Capacity) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	u, err := c.Take(ctx, func() {})
	if err != nil {
		return false
	}
	u.Give()
	return true
}

func workspaces(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "evalflow-ws-*"))
	require.NoError(t, err)
	return m
}

// TestRunLeavesAVerifiedTaskForVerify: Run stores nothing for a task with
// a verifier and keeps its workspace and the worker's capacity; Verify
// stores the verifier's reward and metrics, then gives both back.
func TestRunLeavesAVerifiedTaskForVerify(t *testing.T) {
	r, workDir := verifiedRig(t)
	ref := harborRef(t, "release-bundle")
	s := r.runForVerify(t, ref, time.Minute)

	require.NotNil(t, s.Verify, "the rollout waits for its verifier")
	assert.Equal(t, 60*time.Second, s.Verify.Timeout, "task.toml's verifier timeout")
	_, stored, err := r.store.Get(context.Background(), "run", ref.Key())
	require.NoError(t, err)
	assert.False(t, stored, "nothing is stored before the verifier ran")
	assert.Len(t, workspaces(t, workDir), 1, "the workspace waits for Verify")
	assert.False(t, capacityFree(r.acts.Capacity), "the rollout keeps the worker's capacity until Verify")

	val, err := r.env.ExecuteActivity(r.acts.Verify, rollout.VerifyInput{Rollout: ref})
	require.NoError(t, err)
	var done rollout.Summary
	require.NoError(t, val.Get(&done))
	assert.Equal(t, rollout.StatusOK, done.Status)
	assert.Equal(t, 1.0, done.Reward)
	rec, ok, err := r.store.Get(context.Background(), "run", ref.Key())
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, map[string]float64{"tests": 1, "tests.copied": 1, "tests.manifest": 1, "tests.archive": 1}, rec.Metrics)
	tr, err := r.store.Trace(context.Background(), "run", ref.Key())
	require.NoError(t, err)
	require.NotNil(t, tr.Verifier)
	assert.Equal(t, 1.0, tr.Verifier.Reward)
	assert.Empty(t, workspaces(t, workDir), "Verify removes the workspace")
	assert.True(t, capacityFree(r.acts.Capacity), "Verify gives the capacity back")
}

// TestRunWithoutVerifyScoresByRubric: a workflow from before Verify
// (VerifyWithin unset) gets Run's record at once, scored by its rubric.
func TestRunWithoutVerifyScoresByRubric(t *testing.T) {
	r, workDir := verifiedRig(t)
	ref := harborRef(t, "hello-file")
	s := r.runForVerify(t, ref, 0)
	assert.Nil(t, s.Verify)
	assert.Equal(t, rollout.StatusOK, s.Status)
	assert.Empty(t, workspaces(t, workDir))
	assert.True(t, capacityFree(r.acts.Capacity))
}

// TestVerifyWithoutItsWorkspaceIsSlotLost: a worker asked to verify a
// rollout whose workspace it does not hold (it restarted) says so, and the
// rollout runs again from the start.
func TestVerifyWithoutItsWorkspaceIsSlotLost(t *testing.T) {
	r, _ := verifiedRig(t)
	_, err := r.env.ExecuteActivity(r.acts.Verify, rollout.VerifyInput{Rollout: harborRef(t, "hello-file")})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, rollout.ErrTypeSlotLost, appErr.Type())
}

// TestWorkspaceNeverVerifiedIsRemoved: when the workflow never runs Verify
// (it was cancelled), the workspace is removed and the capacity given back.
func TestWorkspaceNeverVerifiedIsRemoved(t *testing.T) {
	r, workDir := verifiedRig(t)
	r.acts.VerifyGrace = 10 * time.Millisecond
	s := r.runForVerify(t, harborRef(t, "hello-file"), 10*time.Millisecond)
	require.NotNil(t, s.Verify)
	require.Eventually(t, func() bool {
		return len(workspaces(t, workDir)) == 0 && capacityFree(r.acts.Capacity)
	}, 10*time.Second, 20*time.Millisecond)
	assert.Zero(t, activities.OpenLeases(r.acts), "the lease is closed")
}
