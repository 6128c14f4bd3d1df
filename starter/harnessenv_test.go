package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"
)

func TestHarnessEnvFlag(t *testing.T) {
	cfg, _, err := evalWith(t, "--harness-env", "AGENT_MODE=fast,careful", "--harness-env", "PYTHONUNBUFFERED=1")
	require.NoError(t, err)
	assert.Equal(t, []string{"AGENT_MODE=fast,careful", "PYTHONUNBUFFERED=1"}, cfg.Harness.Env, "one entry per flag, commas kept")

	cfg, _, err = evalWith(t)
	require.NoError(t, err)
	assert.Nil(t, cfg.Harness.Env)
}

// A credential is refused before the run starts: the run's input is stored
// in its history.
func TestHarnessEnvRefusesCredentials(t *testing.T) {
	for _, kv := range []string{"OPENAI_API_KEY=sk-abc", "HF_TOKEN=hf_abc", "MY_SECRET=abc", "DB_PASSWORD=abc", "SERVICE_KEY=abc"} {
		_, err := parseEval(t, "--harness-env", kv)
		require.Error(t, err, "--harness-env %s", kv)
		assert.Contains(t, err.Error(), "--harness-env")
		assert.Contains(t, err.Error(), "looks like a credential")
		assert.Contains(t, err.Error(), "credentials stay in the worker's environment")
		assert.NotContains(t, err.Error(), "abc", "the value is not repeated")
	}
	_, err := parseEval(t, "--harness-env", "NOVALUE")
	assert.ErrorContains(t, err, "want KEY=VALUE")
}

func TestHarnessEnvInARunFile(t *testing.T) {
	file := writeFile(t, "run.yaml", "run-id: env\nharness-env:\n  - AGENT_MODE=a,b\n  - DEPTH=3\n")
	cfg, _, err := evalWith(t, "--config", file)
	require.NoError(t, err)
	assert.Equal(t, []string{"AGENT_MODE=a,b", "DEPTH=3"}, cfg.Harness.Env)

	// A dry run prints it as a list, which reads back the same.
	cmd := evalCommand()
	cmd.Action = func(*cli.Context) error { return nil }
	var out bytes.Buffer
	app := &cli.App{Name: "starter", Commands: []*cli.Command{cmd}, Writer: &out}
	err = app.Run([]string{"starter", "eval", "--config", file, "--dry-run"})
	var code exitCode
	require.ErrorAs(t, err, &code)
	var got map[string]any
	require.NoError(t, yaml.Unmarshal(out.Bytes(), &got), out.String())
	assert.Equal(t, []any{"AGENT_MODE=a,b", "DEPTH=3"}, got["harness-env"])
	again := writeFile(t, "again.yaml", out.String())
	cfg, _, err = evalWith(t, "--config", again)
	require.NoError(t, err)
	assert.Equal(t, []string{"AGENT_MODE=a,b", "DEPTH=3"}, cfg.Harness.Env)

	_, _, err = evalWith(t, "--config", writeFile(t, "bad.yaml", "harness-env:\n  - GITHUB_TOKEN=ghp_x\n"))
	assert.ErrorContains(t, err, "GITHUB_TOKEN looks like a credential")
}
