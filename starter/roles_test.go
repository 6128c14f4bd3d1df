package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/rollout"
)

func TestRoleFlag(t *testing.T) {
	cfg, _, err := evalWith(t, "--role", "judge=claude:claude-sonnet-4-5,backup", "--role", "policy=default,backup")
	require.NoError(t, err)
	assert.Equal(t, rollout.Roles{
		Policy: rollout.Route{{Provider: "default"}, {Provider: "backup"}},
		Judge:  rollout.Route{{Provider: "claude", Model: "claude-sonnet-4-5"}, {Provider: "backup"}},
	}, cfg.Harness.Roles, "a role's fallbacks stay one value, commas and all")

	_, _, err = evalWith(t, "--role", "critic=claude")
	require.Error(t, err)
	assert.ErrorContains(t, err, `--role: role "critic": unknown role (want policy, judge or user)`)
}

// A run file gives roles as a list, one role a line.
func TestRunFileRoles(t *testing.T) {
	file := writeFile(t, "run.yaml", "model: mock\nrole:\n  - judge=claude:claude-sonnet-4-5,backup\n  - user=local\n")
	cfg, _, err := evalWith(t, "--config", file)
	require.NoError(t, err)
	assert.Equal(t, rollout.Route{{Provider: "claude", Model: "claude-sonnet-4-5"}, {Provider: "backup"}}, cfg.Harness.Roles.Judge)
	assert.Equal(t, rollout.Route{{Provider: "local"}}, cfg.Harness.Roles.User)
}

// A run file gives the in-process worker's providers as a list too.
func TestRunFileProviders(t *testing.T) {
	file := writeFile(t, "run.yaml", "model: mock\nprovider:\n  - claude=anthropic:https://api.anthropic.com/v1\n  - backup=http://10.0.0.2:8000/v1\n")
	t.Chdir(t.TempDir())
	cmd := evalCommand()
	var got []string
	cmd.Action = func(cctx *cli.Context) error {
		got = cctx.StringSlice("provider")
		return nil
	}
	app := &cli.App{Name: "starter", Commands: []*cli.Command{cmd}}
	require.NoError(t, app.Run([]string{"starter", "eval", "--config", file}))
	assert.Equal(t, []string{"claude=anthropic:https://api.anthropic.com/v1", "backup=http://10.0.0.2:8000/v1"}, got)
}
