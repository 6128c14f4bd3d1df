package container_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/engine"
	"github.com/evalflow/evalflow/internal/engine/enginetest"
	"github.com/evalflow/evalflow/internal/harness/container"
	"github.com/evalflow/evalflow/internal/harness/container/containertest"
)

// A sandbox whose removal met an engine that was gone is removed once the
// engine answers again, by the next sandbox this runtime starts: an
// outage leaves no sandbox behind.
func TestSandboxesAnOutageLeftAreRemovedWhenTheEngineReturns(t *testing.T) {
	real := enginetest.Client(t)
	g := enginetest.NewGate(t, real)
	eng, err := engine.New(g.Host)
	require.NoError(t, err)
	r := &container.Runtime{Engine: eng, Agent: containertest.Agent(t), Dir: t.TempDir(), Worker: "test"}
	tk := task(t, "testdata/steps", "three-files")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := func(key string) *harness.Workspace {
		ws, err := r.PrepareWorkspace("", tk)
		require.NoError(t, err)
		res, err := r.Run(ctx, harness.Spec{Key: key, Command: []string{"true"}, BaseURL: "http://127.0.0.1:9", Secret: "s3cret",
			Task: tk, Timeout: time.Minute, Workspace: ws})
		require.NoError(t, err)
		require.Zero(t, res.ExitCode)
		return ws
	}
	sandboxes := func(key string) int {
		list, err := real.ListContainers(ctx, "evalflow.rollout="+key)
		require.NoError(t, err)
		return len(list)
	}

	first := start("outage/0/0/0")
	require.Equal(t, 1, sandboxes("outage/0/0/0"))
	g.Down()
	err = first.Remove()
	var down *engine.UnavailableError
	require.ErrorAs(t, err, &down, "the engine is gone")
	assert.Equal(t, 1, sandboxes("outage/0/0/0"), "its sandbox outlives the outage's first attempt to remove it")

	g.Up()
	second := start("outage/0/1/0")
	defer func() { assert.NoError(t, second.Remove()) }()
	assert.Zero(t, sandboxes("outage/0/0/0"), "the engine back, the next sandbox's start removed the one it owed")
}
