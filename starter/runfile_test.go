package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"

	"github.com/evalflow/evalflow/workflows"
)

// evalWith runs `starter eval args…` with an action that only builds the
// run's configuration, and returns it and what the command printed.
func evalWith(t *testing.T, args ...string) (workflows.RunConfig, string, error) {
	t.Helper()
	t.Chdir(t.TempDir())
	cmd := evalCommand()
	var got workflows.RunConfig
	cmd.Action = func(cctx *cli.Context) error {
		var err error
		got, err = runConfig(cctx)
		return err
	}
	var out bytes.Buffer
	app := &cli.App{Name: "starter", Commands: []*cli.Command{cmd}, Writer: &out, ErrWriter: &out}
	err := app.Run(append([]string{"starter", "eval"}, args...))
	return got, out.String(), err
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

func TestRunFileValuesAndOverrides(t *testing.T) {
	file := writeFile(t, "run.yaml", "tasks: 12\nrun-id: from-file\ntemperature: 0.25\nshuffle: true\nharness-timeout: 90s\nmodel: mock\n")

	cfg, _, err := evalWith(t, "--config", file)
	require.NoError(t, err)
	assert.Equal(t, "from-file", cfg.RunID)
	assert.Equal(t, int64(12), cfg.Tasks)
	assert.True(t, cfg.Shuffle)
	require.NotNil(t, cfg.Sampling.Temperature, "a value from the file counts as set")
	assert.Equal(t, 0.25, *cfg.Sampling.Temperature)
	assert.Equal(t, "1m30s", cfg.Harness.Timeout.String())

	cfg, _, err = evalWith(t, "--config", file, "--tasks", "3", "--run-id", "from-flag")
	require.NoError(t, err)
	assert.Equal(t, int64(3), cfg.Tasks, "the command line overrides the file")
	assert.Equal(t, "from-flag", cfg.RunID)
	assert.Equal(t, 0.25, *cfg.Sampling.Temperature, "keys the command line does not give still come from the file")
}

// A run chooses how long its rollouts' workers may go silent, on the
// command line or in its run file; the default is the workflows'.
func TestHeartbeatTimeoutSetting(t *testing.T) {
	cfg, _, err := evalWith(t, "--run-id", "r1")
	require.NoError(t, err)
	assert.Equal(t, workflows.DefaultHeartbeatTimeout, cfg.Limits.HeartbeatTimeout)

	cfg, _, err = evalWith(t, "--run-id", "r1", "--heartbeat-timeout", "10m")
	require.NoError(t, err)
	assert.Equal(t, 10*time.Minute, cfg.Limits.HeartbeatTimeout)

	file := writeFile(t, "run.yaml", "heartbeat-timeout: 45s\nrun-id: r2\n")
	cfg, _, err = evalWith(t, "--config", file)
	require.NoError(t, err)
	assert.Equal(t, 45*time.Second, cfg.Limits.HeartbeatTimeout)
}

func TestRunFileTOML(t *testing.T) {
	file := writeFile(t, "run.toml", "tasks = 5\n\"max-concurrent\" = 7\n")
	cfg, _, err := evalWith(t, "--config", file)
	require.NoError(t, err)
	assert.Equal(t, int64(5), cfg.Tasks)
	assert.Equal(t, 7, cfg.MaxConcurrent)

	_, out, err := evalWith(t, "--config", file, "--dry-run", "--run-id", "t1")
	var code exitCode
	require.ErrorAs(t, err, &code)
	var got map[string]any
	require.NoError(t, toml.Unmarshal([]byte(out), &got), "a TOML run file's dry run prints TOML:\n%s", out)
	assert.EqualValues(t, 5, got["tasks"])
	assert.Equal(t, "t1", got["run-id"])
}

func TestRunFileErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"tasks: 3\nbogus-key: 1\n", `unknown key "bogus-key"`},
		{"dry-run: true\n", `unknown key "dry-run"`},
		{"tasks: [1, 2]\n", `key "tasks": want a single value`},
		{"tasks: many\n", `key "tasks"`},
		{"tasks: -3\n", "negative"},
	} {
		file := writeFile(t, "run.yaml", tc.text)
		_, _, err := evalWith(t, "--config", file)
		require.Error(t, err, "run file %q", tc.text)
		assert.ErrorContains(t, err, tc.want, "run file %q", tc.text)
		if tc.want[0] == 'u' {
			assert.ErrorContains(t, err, file, "the error names the file")
		}
	}
}

func TestDryRunPrintsResolvedRun(t *testing.T) {
	t.Setenv("EVALFLOW_FRP_TOKEN", "frp-secret-from-env")
	file := writeFile(t, "run.yaml", "tasks: 12\nrun-id: dry\ninterception.gateway-token: gateway-secret-in-file\n")
	ran := false
	cmd := evalCommand()
	cmd.Action = func(*cli.Context) error { ran = true; return nil }
	var out bytes.Buffer
	app := &cli.App{Name: "starter", Commands: []*cli.Command{cmd}, Writer: &out}
	t.Chdir(t.TempDir())
	err := app.Run([]string{"starter", "eval", "--config", file, "--dry-run", "--max-concurrent", "9"})
	var code exitCode
	require.ErrorAs(t, err, &code)
	assert.Equal(t, exitCode(0), code)
	assert.False(t, ran, "a dry run starts nothing")

	text := out.String()
	assert.NotContains(t, text, "gateway-secret-in-file")
	assert.NotContains(t, text, "frp-secret-from-env")
	var got map[string]any
	require.NoError(t, yaml.Unmarshal(out.Bytes(), &got), text)
	assert.Equal(t, 12, got["tasks"])
	assert.Equal(t, "dry", got["run-id"])
	assert.Equal(t, 9, got["max-concurrent"], "the command line's value")
	assert.Equal(t, "sample", got["taskset"], "defaults are resolved too")
	assert.Equal(t, "", got["interception.gateway-token"], "secrets are blanked")
	assert.Equal(t, "", got["interception.frp.token"])
	assert.Equal(t, workflows.DefaultHarnessTimeout.String(), got["harness-timeout"])
	assert.NotContains(t, got, "config")
	assert.NotContains(t, got, "temperature", "a flag without value or default is no part of the run")

	// What it prints is a run file that gives the same run.
	again := writeFile(t, "again.yaml", text)
	cfg, _, err := evalWith(t, "--config", again)
	require.NoError(t, err)
	assert.Equal(t, "dry", cfg.RunID)
	assert.Equal(t, int64(12), cfg.Tasks)
	assert.Equal(t, 9, cfg.MaxConcurrent)
}

func TestIsSecret(t *testing.T) {
	for name, want := range map[string]bool{
		"interception.gateway-token":  true,
		"interception.frp.token":      true,
		"interception.frp.token-file": false,
		"api-key-env":                 false,
		"interception.ssh.key-file":   false,
		"model":                       false,
	} {
		assert.Equal(t, want, isSecret(name), "isSecret(%q)", name)
	}
}
