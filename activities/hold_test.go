package activities_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/evalflow/evalflow/activities"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/tunnel"
)

// holdRig is a worker whose Acquire holds its slots, on a loopback pool.
type holdRig struct {
	acts    *activities.Activities
	env     *testsuite.TestActivityEnvironment
	signals chan rollout.Slot
}

func newHoldRig(t *testing.T, tun tunnel.Tunnel, signalErr error) *holdRig {
	t.Helper()
	store, err := results.Open(t.TempDir())
	require.NoError(t, err)
	up := &fakeUpstream{}
	up.status.Store(http.StatusOK)
	pool := interception.NewPool(interception.Config{Upstream: up, Tunnel: tun, Multiplex: 4})
	t.Cleanup(func() { assert.NoError(t, pool.Close()) })
	r := &holdRig{signals: make(chan rollout.Slot, 4)}
	r.acts = &activities.Activities{
		Pool: pool, Store: store, Tasksets: &activities.TasksetCache{},
		HostQueue: "host-1", Capacity: activities.NewCapacity(1), Logger: slog.New(slog.DiscardHandler),
		Signal: func(_ context.Context, _, _, name string, arg any) error {
			if signalErr != nil {
				return signalErr
			}
			if name != rollout.SignalSlot {
				return fmt.Errorf("signal %q, want %q", name, rollout.SignalSlot)
			}
			r.signals <- arg.(rollout.Slot)
			return nil
		},
	}
	var suite testsuite.WorkflowTestSuite
	r.env = suite.NewTestActivityEnvironment()
	r.env.RegisterActivity(r.acts)
	return r
}

// acquire runs a holding Acquire in the background and returns its outcome.
func (r *holdRig) acquire(ref rollout.Ref) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := r.env.ExecuteActivity(r.acts.Acquire, rollout.AcquireInput{Rollout: ref, Hold: "7"})
		done <- err
	}()
	return done
}

func TestAcquireHoldsItsSlotUntilRunStarts(t *testing.T) {
	r := newHoldRig(t, tunnel.Local{}, nil)
	done := r.acquire(ref(1))

	slot := <-r.signals
	assert.Equal(t, "7", slot.Token, "the signal answers the attempt's token")
	assert.Equal(t, ref(1).Key(), slot.Key)
	assert.Equal(t, "host-1", slot.HostQueue)
	assert.Regexp(t, `^http://127\.0\.0\.1:\d+$`, slot.BaseURL, "a loopback slot names its URL: nothing to expose")
	select {
	case err := <-done:
		t.Fatalf("Acquire returned before the rollout's Run started: %v", err)
	default:
	}
	assert.Equal(t, 1, r.acts.Pool.Rollouts(), "the slot is held while Acquire waits")

	activities.StartRun(r.acts, slot.Key) // what Run does first
	require.NoError(t, <-done, "Acquire ends once Run has started")
	assert.Equal(t, 1, r.acts.Pool.Rollouts(), "the running rollout keeps its slot")
}

func TestAcquireThroughATunnelLeavesExposeToTheWorkflow(t *testing.T) {
	r := newHoldRig(t, &fakeTunnel{}, nil)
	done := r.acquire(ref(1))
	slot := <-r.signals
	assert.Empty(t, slot.BaseURL, "a tunnelled slot is exposed by its own activity")
	activities.StartRun(r.acts, slot.Key)
	require.NoError(t, <-done)
}

func TestAcquireReleasesASlotItCannotAnnounce(t *testing.T) {
	r := newHoldRig(t, tunnel.Local{}, errors.New("workflow gone"))
	err := <-r.acquire(ref(1))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "workflow gone")
	assert.Zero(t, r.acts.Pool.Rollouts(), "the slot is released")
	// The worker's one unit of capacity is free again.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = r.acts.Capacity.Take(ctx, func() {})
	require.NoError(t, err)
}
