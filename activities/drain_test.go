package activities_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/activities"
	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/rollout"
)

// held runs Acquire and Expose for ref and returns the Run's input, so that
// a test can stop the worker while only Run is running.
func (r *rig) held(t *testing.T, ref rollout.Ref) rollout.RunInput {
	t.Helper()
	_, err := r.env.ExecuteActivity(r.acts.Acquire, rollout.AcquireInput{Rollout: ref})
	require.NoError(t, err)
	val, err := r.env.ExecuteActivity(r.acts.Expose, rollout.ExposeInput{Key: ref.Key()})
	require.NoError(t, err)
	var exp rollout.ExposeResult
	require.NoError(t, val.Get(&exp))
	return rollout.RunInput{Rollout: ref, BaseURL: exp.BaseURL}
}

// A rollout that ends within the drain timeout of a stopping worker is
// stored as any other.
func TestRunDrainedRolloutFinishes(t *testing.T) {
	stopping := make(chan struct{})
	r := newRig(t, func(ctx context.Context, spec harness.Spec) (harness.Result, error) {
		<-stopping // the worker stops while the harness runs
		if status, err := callModel(ctx, spec); err != nil || status != http.StatusOK {
			return harness.Result{ExitCode: 1}, err
		}
		return harness.Result{Answer: spec.Task.Answer}, nil
	})
	r.acts.DrainTimeout = time.Hour
	in := r.held(t, ref(1))
	r.env.SetWorkerStopChannel(stopping)
	close(stopping)
	val, err := r.env.ExecuteActivity(r.acts.Run, in)
	require.NoError(t, err)
	var s rollout.Summary
	require.NoError(t, val.Get(&s))
	assert.Equal(t, rollout.StatusOK, s.Status)
	_, ok, err := r.store.Get(context.Background(), "run", ref(1).Key())
	require.NoError(t, err)
	assert.True(t, ok, "the drained rollout is stored")
}

// A rollout still running when its stopping worker's drain timeout passes,
// or when the worker is told to stop at once, is handed back: a retryable
// WorkerStopped failure, not scored, its trace kept, its slot and capacity
// freed, its harness stopped.
func TestRunHandedBackWhenTheWorkerStops(t *testing.T) {
	for _, tc := range []struct {
		name     string
		drain    time.Duration
		handBack bool
	}{
		{"drain timeout passed", 0, false},
		{"told to stop at once", time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			running := make(chan struct{})
			harnessStopped := make(chan struct{})
			r := newRig(t, func(ctx context.Context, spec harness.Spec) (harness.Result, error) {
				_, _ = callModel(ctx, spec)
				close(running)
				<-ctx.Done() // a rollout that would run for minutes
				close(harnessStopped)
				return harness.Result{ExitCode: -1, Stderr: "killed"}, nil
			})
			r.acts.DrainTimeout = tc.drain
			in := r.held(t, ref(1))
			stopping := make(chan struct{})
			r.env.SetWorkerStopChannel(stopping)
			go func() {
				<-running
				close(stopping)
				if tc.handBack {
					activities.HandBack(r.acts)
				}
			}()
			_, err := r.env.ExecuteActivity(r.acts.Run, in)
			require.Error(t, err)
			var appErr *temporal.ApplicationError
			require.ErrorAs(t, err, &appErr)
			assert.Equal(t, rollout.ErrTypeWorkerStopped, appErr.Type())
			assert.False(t, appErr.NonRetryable(), "the workflow retries it elsewhere")
			assert.Contains(t, err.Error(), "the worker stopped")
			select {
			case <-harnessStopped:
			default:
				t.Fatal("the harness still runs")
			}

			ctx := context.Background()
			_, ok, err := r.store.Get(ctx, "run", ref(1).Key())
			require.NoError(t, err)
			assert.False(t, ok, "nothing is scored")
			all, err := r.store.Attempts(ctx, "run", ref(1).Key())
			require.NoError(t, err)
			require.Len(t, all, 1, "the attempt's trace is kept")
			assert.Contains(t, all[0].Error, "the worker stopped")
			assert.Len(t, all[0].Turns, 1)
			assert.Zero(t, r.acts.Pool.Rollouts(), "the slot is released")
			for range 4 {
				_, ok := r.acts.Capacity.TryTake()
				assert.True(t, ok, "the capacity is given back")
			}
		})
	}
}

// An Acquire waiting for capacity on a stopping worker ends at once,
// handed back, so that another worker takes the rollout.
func TestAcquireHandedBackWhenTheWorkerStops(t *testing.T) {
	r := newRig(t, func(ctx context.Context, spec harness.Spec) (harness.Result, error) {
		return harness.Result{}, nil
	})
	for range 4 { // the worker is full
		_, ok := r.acts.Capacity.TryTake()
		require.True(t, ok)
	}
	stopping := make(chan struct{})
	r.env.SetWorkerStopChannel(stopping)
	close(stopping)
	_, err := r.env.ExecuteActivity(r.acts.Acquire, rollout.AcquireInput{Rollout: ref(1)})
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, rollout.ErrTypeWorkerStopped, appErr.Type())
	assert.False(t, appErr.NonRetryable())
}
