package wiring

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/auto"
	"github.com/evalflow/evalflow/internal/harness/container"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/internal/harness/packaged"
)

// Every worker runtime is wrapped so that packaged harnesses run on it, its
// remoteness kept, and whether it prepares its own workspaces (the
// container runtime, and auto through it) seen through the wrapper;
// runtimes that do not see this host's files refuse packaged harnesses.
func TestPackagedRuntime(t *testing.T) {
	for _, tc := range []struct {
		rt        harness.Runtime
		supported bool
		remote    bool
		images    bool
	}{
		{&local.Runtime{}, true, false, false},
		{&local.Netns{}, true, true, false},
		{&local.Bwrap{}, false, false, false},
		{&local.Bwrap{IsolateNet: true}, false, true, false},
		{&auto.Runtime{}, true, false, true},
		{&container.Runtime{}, true, false, true},
	} {
		rt := packagedRuntime(tc.rt, "/cache", "/work")
		p, ok := rt.(*packaged.Runtime)
		require.True(t, ok, "%T is wrapped", tc.rt)
		assert.Same(t, tc.rt, p.Runtime)
		assert.Equal(t, "/cache", p.Installer.Dir)
		assert.Equal(t, tc.supported, p.Unsupported == "", "%T: %s", tc.rt, p.Unsupported)
		assert.Equal(t, tc.remote, harness.IsRemote(rt), "%T keeps its remoteness", tc.rt)
		_, prepares := harness.PreparerOf(rt)
		assert.Equal(t, tc.images, prepares, "%T prepares its own workspaces", tc.rt)
		assert.Same(t, p, packagedRuntime(p, "/other", "/work"), "wrapped once")
	}
}
