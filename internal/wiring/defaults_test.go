package wiring

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/internal/harness/packaged"
)

// A zero Config is a worker on the shared queue with local subprocesses and
// the built-in agent; what is given is kept.
func TestConfigWithDefaults(t *testing.T) {
	t.Setenv(AgentEnv, "")
	got, err := Config{WorkDir: "/w"}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, DefaultTaskQueue, got.TaskQueue)
	assert.Equal(t, defaultMaxRollouts, got.MaxRollouts)
	assert.Equal(t, "OPENAI_API_KEY", got.APIKeyEnv)
	assert.Equal(t, slog.Default(), got.Logger)
	assert.Equal(t, DefaultMultiplex, got.Multiplex)
	assert.NotEmpty(t, got.DefaultHarness, "the built-in agent")
	p, ok := got.Runtime.(*packaged.Runtime)
	require.True(t, ok, "packaged harnesses run on the runtime, got %T", got.Runtime)
	assert.Equal(t, &local.Runtime{Dir: "/w"}, p.Runtime)

	got, err = Config{UpstreamDialect: "anthropic"}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, "ANTHROPIC_API_KEY", got.APIKeyEnv, "an anthropic upstream's key")

	given := Config{TaskQueue: "q", MaxRollouts: 3, APIKeyEnv: "KEY", Multiplex: 2, DefaultHarness: []string{"agent"}}
	got, err = given.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, "q", got.TaskQueue)
	assert.Equal(t, 3, got.MaxRollouts)
	assert.Equal(t, "KEY", got.APIKeyEnv)
	assert.Equal(t, 2, got.Multiplex)
	assert.Equal(t, []string{"agent"}, got.DefaultHarness)
}
