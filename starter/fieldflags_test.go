package main

import (
	"context"
	"errors"
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/workflows"
)

// A field the run's Validate refuses is named as the flag that sets it,
// and that flag is one the run commands have.
func TestFieldFlagsAreFlags(t *testing.T) {
	flags := map[string]bool{}
	for _, cmd := range []*cli.Command{evalCommand(), trainCommand()} {
		for _, f := range cmd.Flags {
			for _, name := range f.Names() {
				flags[name] = true
			}
		}
	}
	for field, flag := range fieldFlags {
		assert.True(t, flags[flag], "field %s: the run commands have no --%s", field, flag)
	}

	cctx := resumeContext(t)
	err := flagError(cctx, &workflows.FieldError{Field: "limits.max_attempts", Problem: "0: must be at least 1"})
	assert.EqualError(t, err, "--max-attempts 0: must be at least 1")
	err = flagError(cctx, &workflows.FieldError{Field: "rollouts_per_task", Problem: "0: must be at least 1"})
	assert.EqualError(t, err, "--group-size 0: must be at least 1", "training's rollouts per task")
	other := errors.New("other")
	assert.Equal(t, other, flagError(cctx, other), "not a field's error: as it is")
	assert.NoError(t, flagError(cctx, nil))
}

// A run command without a flag of the rollouts per task (audit) runs the
// default, not a 0 refused.
func TestRunConfigWithoutRolloutsFlag(t *testing.T) {
	set := flag.NewFlagSet("audit", flag.ContinueOnError)
	for _, f := range auditCommand().Flags {
		require.NoError(t, f.Apply(set))
	}
	require.NoError(t, set.Parse([]string{"--run-id", "a1"}))
	cctx := cli.NewContext(&cli.App{}, set, nil)
	cctx.Context = context.Background()
	cfg, err := runConfig(cctx)
	require.NoError(t, err)
	assert.Equal(t, workflows.DefaultRolloutsPerTask, cfg.RolloutsPerTask)
}
