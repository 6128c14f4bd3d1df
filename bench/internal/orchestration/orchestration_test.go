package orchestration_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/bench/internal/orchestration"
)

// TestBothSystemsRunEveryRollout runs a small eval on the embedded server
// and through the errgroup, and checks both ran every rollout.
func TestBothSystemsRunEveryRollout(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := orchestration.StartServer(ctx, t.TempDir())
	require.NoError(t, err)
	defer func() { assert.NoError(t, srv.Close()) }()
	cfg := orchestration.Config{Rollouts: 24, Concurrency: 8, RunsDir: t.TempDir(), ContinueAsNewAfter: 10}
	w, err := orchestration.NewWorker(srv.Client, "bench-test", cfg)
	require.NoError(t, err)
	defer w.Stop()

	tr, err := orchestration.Temporal(ctx, srv.Client, "bench-test", "bench-temporal", cfg)
	require.NoError(t, err)
	assert.Equal(t, 24, tr.Rollouts)
	assert.Zero(t, tr.Failed)
	assert.Equal(t, 3, tr.Runs, "24 rollouts at 10 per run continue as new twice")
	assert.GreaterOrEqual(t, tr.ScheduleToStart.N, 24*2, "an Acquire and a Run per rollout: a loopback slot needs no Expose")

	er, err := orchestration.Errgroup(ctx, "bench-errgroup", cfg)
	require.NoError(t, err)
	assert.Zero(t, er.Failed)
	assert.Equal(t, 24*3, er.ScheduleToStart.N)
}
