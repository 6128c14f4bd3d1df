package run

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/evalflow/evalflow/workflows"
)

// given names the settings given.
func given(names ...string) func(string) bool {
	return func(name string) bool { return slices.Contains(names, name) }
}

func TestSettingsApply(t *testing.T) {
	old := workflows.TrainInput{
		Config: workflows.RunConfig{RunID: "r", Taskset: "sample", Tasks: 50, RolloutsPerTask: 4, Model: "mock", Seed: 7},
		Train:  workflows.TrainConfig{Epochs: 2},
	}
	s := Settings{Config: workflows.RunConfig{Taskset: "other", Tasks: 60, RolloutsPerTask: 4, Seed: 9}, Train: workflows.TrainConfig{Epochs: 2}}

	in, changed := s.Apply(old)
	assert.Empty(t, changed, "no setting given: nothing changes")
	assert.Equal(t, old, in)

	s.Given = given("tasks", "group-size", "epochs")
	in, changed = s.Apply(old)
	assert.Equal(t, []string{"tasks"}, changed, "only the given settings whose value differs")
	assert.Equal(t, int64(60), in.Config.Tasks)
	assert.Equal(t, "sample", in.Config.Taskset, "a setting not given keeps the stored value")
	assert.Equal(t, uint64(7), in.Config.Seed)

	s.Config.Limits.HeartbeatTimeout = 10 * time.Minute
	s.Given = given("heartbeat-timeout")
	in, changed = s.Apply(old)
	assert.Equal(t, []string{"heartbeat-timeout"}, changed)
	assert.Equal(t, 10*time.Minute, in.Config.Limits.HeartbeatTimeout)

	s.Config.Harness.TokenIn = true
	s.Given = given("token-in")
	in, changed = s.Apply(old)
	assert.Equal(t, []string{"token-in"}, changed, "token-in is a setting of the run")
	assert.True(t, in.Config.Harness.TokenIn)
}

func TestResume(t *testing.T) {
	ctx := context.Background()
	stored := workflows.TrainInput{Config: workflows.RunConfig{RunID: "r", Tasks: 10, Model: "mock"}, Train: workflows.TrainConfig{Epochs: 2}}
	changed := func() (Settings, error) {
		return Settings{Config: workflows.RunConfig{Tasks: 20, Model: "mock"}, Given: given("tasks")}, nil
	}

	_, err := Resume(ctx, &fakeTemporal{}, ResumeInput{RunID: "r"})
	require.ErrorIs(t, err, ErrNotFound)

	c := &fakeTemporal{kind: workflows.TrainName, status: enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, input: stored}
	_, err = Resume(ctx, c, ResumeInput{RunID: "r", Settings: changed})
	var refused *ChangedError
	require.ErrorAs(t, err, &refused)
	assert.Equal(t, []string{"tasks"}, refused.Settings)
	assert.Empty(t, c.started, "a changed run is not resumed unless forced")

	r, err := Resume(ctx, c, ResumeInput{RunID: "r", Settings: changed, Force: true, RetryFailed: true})
	require.NoError(t, err)
	require.NotNil(t, r.Started)
	assert.Equal(t, workflows.TrainName, r.Kind)
	want := stored
	want.Config.Tasks, want.Config.RetryFailed = 20, true
	assert.Equal(t, []any{want}, c.started)

	// Settings that cannot be read refuse a restart, not a running run.
	bad := errors.New("bad flag")
	_, err = Resume(ctx, c, ResumeInput{RunID: "r", Settings: func() (Settings, error) { return Settings{}, bad }})
	require.ErrorIs(t, err, bad)

	// A running run is left to run; Check vets its configuration.
	c = &fakeTemporal{kind: workflows.EvalName, status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, input: stored}
	refuse := errors.New("refused")
	_, err = Resume(ctx, c, ResumeInput{RunID: "r", Check: func(workflows.RunConfig) error { return refuse }})
	require.ErrorIs(t, err, refuse)
	r, err = Resume(ctx, c, ResumeInput{RunID: "r", Settings: func() (Settings, error) { return Settings{}, bad }})
	require.NoError(t, err)
	assert.Nil(t, r.Started)
	assert.Empty(t, c.started)

	// A finished training run stays finished.
	c = &fakeTemporal{kind: workflows.TrainName, status: enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, input: stored}
	r, err = Resume(ctx, c, ResumeInput{RunID: "r", RetryFailed: true})
	require.NoError(t, err)
	assert.Nil(t, r.Started)
}

// Raising an evaluation's --max-run-cost is no change of its settings: a
// finished eval (one stopped at its bound) starts again under the bound
// given, without --force; --max-cost is a setting of its rollouts.
func TestResumeWithAHigherRunCost(t *testing.T) {
	ctx := context.Background()
	stored := workflows.TrainInput{Config: workflows.RunConfig{RunID: "r", Tasks: 10, Model: "mock", MaxRunCostUSD: 1}}
	raised := func() (Settings, error) {
		return Settings{Config: workflows.RunConfig{Tasks: 10, Model: "mock", MaxRunCostUSD: 5}, Given: given("max-run-cost")}, nil
	}

	c := &fakeTemporal{kind: workflows.EvalName, status: enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, input: stored}
	r, err := Resume(ctx, c, ResumeInput{RunID: "r", Settings: raised})
	require.NoError(t, err)
	assert.Nil(t, r.Started, "a finished eval stays finished unless a bound is given")

	r, err = Resume(ctx, c, ResumeInput{RunID: "r", Settings: raised, RunCostGiven: true})
	require.NoError(t, err, "a raised bound needs no --force")
	require.NotNil(t, r.Started)
	want := stored.Config
	want.MaxRunCostUSD = 5
	assert.Equal(t, []any{workflows.EvalInput{Config: want}}, c.started)

	s := Settings{Config: workflows.RunConfig{Harness: stored.Config.Harness}, Given: given("max-cost")}
	s.Config.Harness.MaxCostUSD = 0.5
	in, changed := s.Apply(stored)
	assert.Equal(t, []string{"max-cost"}, changed, "max-cost bounds each rollout: a setting of the run")
	assert.Equal(t, 0.5, in.Config.Harness.MaxCostUSD)
}
