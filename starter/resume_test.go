package main

import (
	"context"
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/rollout"
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

// configChange is a run's stored input with the flags given on the command
// line applied, and the flags that changed it.
type configChange struct {
	input  workflows.TrainInput
	fields []string
}

// changedConfig applies the flags set on the command line to the stored
// input, as resume does.
func changedConfig(cctx *cli.Context, old workflows.TrainInput) (configChange, error) {
	given, err := resumeSettings(cctx)
	if err != nil {
		return configChange{}, err
	}
	in, changed := given.Apply(old)
	return configChange{input: in, fields: flagNames(changed)}, nil
}
