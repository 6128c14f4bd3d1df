package wiring

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/harness/agent"
)

func TestBuiltinAgentPrefersTheLeanProgram(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	lean := filepath.Join(dir, AgentProgram)
	require.NoError(t, os.WriteFile(lean, []byte("#!/bin/sh\n"), 0o755))

	t.Setenv(AgentEnv, "")
	t.Setenv("PATH", t.TempDir())
	command, isLean, err := builtinAgent()
	require.NoError(t, err)
	assert.Equal(t, []string{exe, agent.Subcommand}, command, "nothing found: this program's own agent command")
	assert.False(t, isLean)

	t.Setenv("PATH", dir)
	command, isLean, err = builtinAgent()
	require.NoError(t, err)
	assert.Equal(t, []string{lean}, command, "found on PATH")
	assert.True(t, isLean)

	other := filepath.Join(t.TempDir(), "my-agent")
	require.NoError(t, os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755))
	t.Setenv(AgentEnv, other)
	command, _, err = builtinAgent()
	require.NoError(t, err)
	assert.Equal(t, []string{other}, command, "the variable wins")

	t.Setenv(AgentEnv, filepath.Join(dir, "missing"))
	_, _, err = builtinAgent()
	assert.ErrorContains(t, err, AgentEnv, "a variable naming nothing is an error, not a silent fallback")
}
