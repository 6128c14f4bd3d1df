package run

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

// A training run stopped (Ctrl-C) with 60 rollouts stored, 3 of them failed,
// then resumed while its workflow was still running: the workflow counts 77
// as ran by its own execution, but the store held 57 successes before the
// resume and 23 rollouts were added or run again since.
func TestAccount(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store := storetest.Files(t, dir)
	put := func(epoch int, index int64, status string, attempt int) {
		t.Helper()
		_, _, err := store.Put(ctx, results.Record{
			Key: rollout.Key("r", epoch, index, 0), RunID: "r", Epoch: epoch, Index: index,
			Status: status, Reward: 1, Attempt: attempt,
		}, nil)
		require.NoError(t, err)
	}
	for i := range int64(60) {
		status := rollout.StatusOK
		if i < 3 {
			status = rollout.StatusError
		}
		put(0, i, status, 1)
	}

	account := NewAccount(ctx, store, "r")
	for i := range int64(3) {
		put(0, i, rollout.StatusOK, 2) // the failures, run again
	}
	for i := int64(60); i < 80; i++ {
		put(0, i, rollout.StatusOK, 1)
	}
	for i := range int64(80) {
		put(1, i, rollout.StatusOK, 1)
	}

	res := workflows.TrainResult{
		Epochs: []workflows.EpochResult{
			{Epoch: 0, Ran: 77, Run: workflows.Result{Rollouts: 80, Reused: 3}},
			{Epoch: 1, Ran: 80, Run: workflows.Result{Rollouts: 80}},
		},
		Rollouts: 160, Ran: 157, Reused: 3,
	}
	account.Train(ctx, &res)
	assert.Equal(t, int64(23), res.Epochs[0].Ran)
	assert.Equal(t, int64(57), res.Epochs[0].Run.Reused)
	assert.Equal(t, int64(80), res.Epochs[1].Ran)
	assert.Zero(t, res.Epochs[1].Run.Reused)
	assert.Equal(t, int64(103), res.Ran)
	assert.Equal(t, int64(57), res.Reused)
	var summary workflows.TrainResult
	require.NoError(t, store.ReadSummary(ctx, "r", &summary))
	assert.Equal(t, res, summary, "`starter results` prints the same counts")

	eval := workflows.Result{Rollouts: 160, Reused: 3}
	account.Eval(ctx, &eval)
	assert.Equal(t, int64(57), eval.Reused)

	// A store that holds nothing of the run cannot tell: the workflow's counts stand.
	empty := storetest.Files(t, "")
	other := NewAccount(ctx, empty, "r")
	res = workflows.TrainResult{Epochs: []workflows.EpochResult{{Epoch: 0, Ran: 77, Run: workflows.Result{Reused: 3}}}, Ran: 77, Reused: 3}
	other.Train(ctx, &res)
	assert.Equal(t, int64(77), res.Epochs[0].Ran)
	assert.Equal(t, int64(3), res.Reused)

	// No store: the workflow's counts stand.
	res = workflows.TrainResult{Ran: 77, Reused: 3}
	NewAccount(ctx, nil, "r").Train(ctx, &res)
	assert.Equal(t, int64(77), res.Ran)
}

func TestLoad(t *testing.T) {
	ctx := context.Background()
	store := storetest.Files(t, "")
	_, err := Load(ctx, store, "r")
	require.ErrorIs(t, err, ErrNotFound)

	for i, reward := range []float64{1, 0.5, 0} {
		rec := results.Record{Key: rollout.Key("r", i%2, int64(i), 0), RunID: "r", Epoch: i % 2, Index: int64(i), Reward: reward, Status: rollout.StatusOK, Attempt: 1}
		if reward == 0 {
			rec.Status = rollout.StatusError
		}
		_, _, err := store.Put(ctx, rec, nil)
		require.NoError(t, err)
	}
	s, err := Load(ctx, store, "r")
	require.NoError(t, err)
	assert.Nil(t, s.Summary, "a run without a summary has not finished")
	assert.False(t, s.IsTrain())
	assert.Equal(t, Counts{Rollouts: 3, OK: 2, Failed: 1, MeanReward: 0.5, Epochs: 2}, Count(s.Records))

	require.NoError(t, store.WriteSummary(ctx, "r", workflows.TrainResult{RunID: "r", Epochs: []workflows.EpochResult{{Epoch: 0}}}))
	s, err = Load(ctx, store, "r")
	require.NoError(t, err)
	require.NotNil(t, s.Summary)
	require.NotNil(t, s.Summary.Train, "a summary with epochs is a training run's")
	assert.Nil(t, s.Summary.Eval)
	assert.True(t, s.IsTrain())
}

func TestSummaryDecodes(t *testing.T) {
	for _, tt := range []struct {
		json  string
		train bool
	}{
		{`{"run_id": "e", "model": "mock", "pass_at_k": [{"k": 1, "value": 0.5}]}`, false},
		{`{"run_id": "t", "epochs": [{"epoch": 0}], "ran": 4}`, true},
		{`{"run_id": "t", "epochs": []}`, true},
	} {
		var s Summary
		require.NoError(t, json.Unmarshal([]byte(tt.json), &s), "Unmarshal(%s)", tt.json)
		assert.Equal(t, tt.train, s.Train != nil, "Unmarshal(%s).Train", tt.json)
		assert.Equal(t, !tt.train, s.Eval != nil, "Unmarshal(%s).Eval", tt.json)
		b, err := json.Marshal(s)
		require.NoError(t, err)
		var again Summary
		require.NoError(t, json.Unmarshal(b, &again))
		assert.Equal(t, s, again, "Marshal(%s) round-trips", tt.json)
	}
	var s Summary
	assert.Error(t, json.Unmarshal([]byte(`[1]`), &s))
}

func TestStatus(t *testing.T) {
	ctx := context.Background()
	_, err := Status(ctx, &fakeTemporal{}, "r")
	require.ErrorIs(t, err, ErrNotFound)

	l, err := Status(ctx, &fakeTemporal{kind: workflows.TrainName, status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}, "r")
	require.NoError(t, err)
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, l.Status)
	assert.Equal(t, workflows.TrainName, l.Kind)
	assert.Nil(t, l.Progress, "no worker answers the query")
	assert.Error(t, l.ProgressErr)
}

// The starter re-attached to a run still running on its first execution:
// everything the store held then was run by that execution, and nothing is
// reused, in the result nor in the stored summary. A record stored before
// the execution started (by an earlier one) is reused.
func TestAccountAttachedToARunningRun(t *testing.T) {
	ctx := context.Background()
	store := storetest.Files(t, "")
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	put := func(index int64, finished time.Time) {
		t.Helper()
		_, _, err := store.Put(ctx, results.Record{
			Key: rollout.Key("r", 0, index, 0), RunID: "r", Index: index,
			Status: rollout.StatusOK, Reward: 1, Attempt: 1, FinishedAt: finished,
		}, nil)
		require.NoError(t, err)
	}
	put(0, start.Add(-time.Hour)) // an earlier execution's
	for i := int64(1); i < 219; i++ {
		put(i, start.Add(time.Duration(i)*time.Second))
	}

	account := NewAccount(ctx, store, "r")
	account.AttachedSince(start)
	for i := int64(219); i < 256; i++ {
		put(i, start.Add(time.Hour))
	}
	res := workflows.Result{Rollouts: 256, Reused: 1}
	account.Eval(ctx, &res)
	assert.Equal(t, int64(1), res.Reused, "only the earlier execution's rollout was reused")
	var summary workflows.Result
	require.NoError(t, store.ReadSummary(ctx, "r", &summary))
	assert.Equal(t, int64(1), summary.Reused, "the stored summary says the same")
}
