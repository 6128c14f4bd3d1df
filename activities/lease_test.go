package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/activities"
	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/rollout"
)

// requireReleased asserts that the worker holds nothing of a rollout any
// more: no lease, its capacity free, its interception registration gone.
func requireReleased(t *testing.T, r *rig, key string) {
	t.Helper()
	assert.Zero(t, activities.OpenLeases(r.acts), "every lease is closed")
	assert.True(t, capacityFree(r.acts.Capacity), "the capacity is given back")
	assert.Zero(t, r.acts.Pool.Rollouts(), "the interception registration is released")
}

// A Run that ends its rollout, well or as the agent's failure, closes the
// attempt's lease.
func TestLeaseClosedWhenRunEnds(t *testing.T) {
	for name, res := range map[string]harness.Result{
		"success":       {Answer: "42"},
		"agent failure": {ExitCode: 1, Stderr: "boom"},
	} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, func(context.Context, harness.Spec) (harness.Result, error) { return res, nil })
			r.acts.Capacity = activities.NewCapacity(1)
			s, err := r.rollout(t, ref(1))
			require.NoError(t, err)
			assert.Equal(t, res.ExitCode != 0, s.Status == rollout.StatusError, "%+v", s)
			requireReleased(t, r, ref(1).Key())
		})
	}
}

// A slot given back before its rollout ran (the workflow released it)
// closes the lease.
func TestLeaseClosedByRelease(t *testing.T) {
	r := newRig(t, nil)
	r.acts.Capacity = activities.NewCapacity(1)
	_, err := r.env.ExecuteActivity(r.acts.Acquire, rollout.AcquireInput{Rollout: ref(1)})
	require.NoError(t, err)
	assert.Equal(t, 1, activities.OpenLeases(r.acts))
	assert.False(t, capacityFree(r.acts.Capacity))
	_, err = r.env.ExecuteActivity(r.acts.Release, rollout.ReleaseInput{Key: ref(1).Key()})
	require.NoError(t, err)
	requireReleased(t, r, ref(1).Key())
}

// A Run handed over to Verify keeps the lease (workspace and capacity);
// Verify closes it.
func TestLeaseHandedOverToVerify(t *testing.T) {
	r, workDir := verifiedRig(t)
	ref := harborRef(t, "hello-file")
	s := r.runForVerify(t, ref, time.Minute)
	require.NotNil(t, s.Verify)
	assert.Equal(t, 1, activities.OpenLeases(r.acts), "the lease waits for Verify")
	_, err := r.env.ExecuteActivity(r.acts.Verify, rollout.VerifyInput{Rollout: ref})
	require.NoError(t, err)
	requireReleased(t, r, ref.Key())
	assert.Empty(t, workspaces(t, workDir))
}

// A stopping worker closes the leases waiting for a Verify that will not
// come here: workspaces removed, capacity given back; a Verify after it
// finds nothing (SlotLost, the rollout runs again).
func TestLeasesClosedWhenTheWorkerStops(t *testing.T) {
	r, workDir := verifiedRig(t)
	ref := harborRef(t, "hello-file")
	r.runForVerify(t, ref, time.Minute)
	require.Len(t, workspaces(t, workDir), 1)
	activities.CloseLeases(r.acts)
	requireReleased(t, r, ref.Key())
	assert.Empty(t, workspaces(t, workDir), "the waiting workspace is removed")
	_, err := r.env.ExecuteActivity(r.acts.Verify, rollout.VerifyInput{Rollout: ref})
	require.ErrorContains(t, err, "is not on this worker")
}

// A slot whose rollout never came to run is swept: its lease is closed.
func TestLeaseSwept(t *testing.T) {
	r := newRig(t, nil)
	r.acts.Capacity = activities.NewCapacity(1)
	_, err := r.env.ExecuteActivity(r.acts.Acquire, rollout.AcquireInput{Rollout: ref(1)})
	require.NoError(t, err)
	assert.Empty(t, activities.Sweep(r.acts, time.Hour), "a young unit stays")
	assert.Equal(t, []string{ref(1).Key()}, activities.Sweep(r.acts, 0))
	requireReleased(t, r, ref(1).Key())
	_, err = r.env.ExecuteActivity(r.acts.Run, rollout.RunInput{Rollout: ref(1)})
	require.ErrorContains(t, err, "is not held by this worker", "a swept rollout runs again from its Acquire")
}

// A retried Acquire of a rollout holds the lease the first one opened:
// one capacity unit, one registration, on a worker with room for one.
func TestLeaseHeldOnceByARetriedAcquire(t *testing.T) {
	r := newRig(t, nil)
	r.acts.Capacity = activities.NewCapacity(1)
	for range 2 {
		_, err := r.env.ExecuteActivity(r.acts.Acquire, rollout.AcquireInput{Rollout: ref(1)})
		require.NoError(t, err)
	}
	assert.Equal(t, 1, activities.OpenLeases(r.acts))
	assert.Equal(t, 1, r.acts.Pool.Rollouts())
	_, err := r.env.ExecuteActivity(r.acts.Release, rollout.ReleaseInput{Key: ref(1).Key()})
	require.NoError(t, err)
	requireReleased(t, r, ref(1).Key())
}
