package main

import (
	"context"
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/wiring"
	"github.com/evalflow/evalflow/workflows"
)

func resumeContext(t *testing.T, args ...string) *cli.Context {
	t.Helper()
	set := flag.NewFlagSet("resume", flag.ContinueOnError)
	for _, f := range resumeCommand().Flags {
		require.NoError(t, f.Apply(set))
	}
	require.NoError(t, set.Parse(args))
	cctx := cli.NewContext(&cli.App{}, set, nil)
	cctx.Context = context.Background()
	return cctx
}

func TestChangedConfig(t *testing.T) {
	old := workflows.TrainInput{
		Config: workflows.RunConfig{RunID: "r", Taskset: "sample", Tasks: 50, RolloutsPerTask: 4, Model: "mock", Seed: 7, Rubric: "numeric"},
		Train:  workflows.TrainConfig{Epochs: 2, MaxFailures: 3},
	}
	same, err := changedConfig(resumeContext(t, "--tasks", "50", "--epochs", "2"), old)
	require.NoError(t, err)
	assert.Empty(t, same.fields, "repeating the original flags changes nothing")
	assert.Equal(t, old, same.input, "unset flags keep the stored settings, not the flag defaults")

	changed, err := changedConfig(resumeContext(t, "--tasks", "60", "--group-size", "4", "--max-failures", "0.5", "--harness", "python a.py"), old)
	require.NoError(t, err)
	assert.Equal(t, []string{"--tasks", "--harness", "--max-failures"}, changed.fields)
	assert.Equal(t, int64(60), changed.input.Config.Tasks)
	assert.Equal(t, []string{"python", "a.py"}, changed.input.Config.Harness.Command)
	assert.Equal(t, 0.5, changed.input.Train.MaxFailures)
	assert.Equal(t, "r", changed.input.Config.RunID)
}

func TestChangedConfigHarnessDialect(t *testing.T) {
	old := workflows.TrainInput{Config: workflows.RunConfig{RunID: "r", Taskset: "sample", Model: "mock", Harness: rollout.HarnessConfig{Dialect: "chat"}}}
	changed, err := changedConfig(resumeContext(t, "--harness-dialect", "anthropic"), old)
	require.NoError(t, err)
	assert.Equal(t, []string{"--harness-dialect"}, changed.fields)
	assert.Equal(t, "anthropic", changed.input.Config.Harness.Dialect)

	same, err := changedConfig(resumeContext(t, "--harness-dialect", "chat"), old)
	require.NoError(t, err)
	assert.Empty(t, same.fields)
}

// A training run stopped (Ctrl-C) with 60 rollouts stored, 3 of them failed,
// then resumed while its workflow was still running: the workflow counts 77
// as ran by its own execution, but the store held 57 successes before the
// resume and 23 rollouts were added or run again since.
func TestStoreAccount(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := results.Open(dir)
	require.NoError(t, err)
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

	account := newStoreAccount(ctx, wiring.StoreConfig{RunsDir: dir}, "r")
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
	account.train(ctx, &res)
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
	account.eval(ctx, &eval)
	assert.Equal(t, int64(57), eval.Reused)

	// A store that holds nothing of the run cannot tell: the workflow's counts stand.
	other := newStoreAccount(ctx, wiring.StoreConfig{RunsDir: t.TempDir()}, "r")
	res = workflows.TrainResult{Epochs: []workflows.EpochResult{{Epoch: 0, Ran: 77, Run: workflows.Result{Reused: 3}}}, Ran: 77, Reused: 3}
	other.train(ctx, &res)
	assert.Equal(t, int64(77), res.Epochs[0].Ran)
	assert.Equal(t, int64(3), res.Reused)
}
