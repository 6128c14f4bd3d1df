package main

import (
	"context"
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/workflows"
)

// parseEval parses eval's flags from args and builds the run's config.
func parseEval(t *testing.T, args ...string) (workflows.RunConfig, error) {
	t.Helper()
	set := flag.NewFlagSet("eval", flag.ContinueOnError)
	for _, f := range evalCommand().Flags {
		require.NoError(t, f.Apply(set))
	}
	require.NoError(t, set.Parse(args))
	cctx := cli.NewContext(&cli.App{}, set, nil)
	cctx.Context = context.Background()
	return runConfig(cctx)
}

func TestRunConfigFromFlags(t *testing.T) {
	cfg, err := parseEval(t, "--tasks", "12", "--harness", "python 'my agent.py' --fast", "--temperature", "0.5", "--run-id", "r1")
	require.NoError(t, err)
	assert.Equal(t, "r1", cfg.RunID)
	assert.Equal(t, int64(12), cfg.Tasks)
	assert.Equal(t, []string{"python", "my agent.py", "--fast"}, cfg.Harness.Command)
	require.NotNil(t, cfg.Sampling.Temperature)
	assert.Equal(t, 0.5, *cfg.Sampling.Temperature)
	assert.Nil(t, cfg.Sampling.TopP, "unset sampling fields stay unset")
	assert.Equal(t, "mock", cfg.Model, "no provider: the mock model")
	assert.Equal(t, "sample", cfg.Taskset)
}

func TestRunConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--run-id", "a/b"}, "--run-id"},
		{[]string{"--base-url", "http://127.0.0.1:1/v1"}, "--model is required"},
		{[]string{"--harness", "'unclosed"}, "--harness"},
		{[]string{"--tasks", "-3"}, "negative"},
		{[]string{"--harness-dialect", "gemini"}, "--harness-dialect"},
	} {
		_, err := parseEval(t, tc.args...)
		require.Error(t, err, "runConfig(%q)", tc.args)
		assert.Contains(t, err.Error(), tc.want, "runConfig(%q)", tc.args)
	}
}

func TestGeneratedRunIDsDiffer(t *testing.T) {
	a, b := newRunID("eval"), newRunID("eval")
	assert.NotEqual(t, a, b)
	assert.Regexp(t, `^eval-\d{8}-\d{6}-[0-9a-f]{6}$`, a)
}
