package auto

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/hostpaths"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/tasksets"
)

// fakeSandboxes stands in for the container runtime: Runtime only asks
// whether it is there.
type fakeSandboxes struct{ harness.Runtime }

func (fakeSandboxes) Verify(context.Context, harness.VerifySpec) (harness.VerifyResult, error) {
	return harness.VerifyResult{}, nil
}

func (fakeSandboxes) PrepareWorkspace(string, tasksets.Task) (*harness.Workspace, error) {
	return nil, nil
}

// A task with an environment whose scripts assume a sandbox's paths is
// checked where it runs: bwrap or a container take it, and with neither it
// is refused; a task without one runs locally and is held to the local
// runtime's check.
func TestCheckTaskWhereTheTaskRuns(t *testing.T) {
	sandboxed := tasksets.Task{ID: "app", Verify: "cat /app/out.txt", Info: []byte(`{"environment":{"docker_image":"img"}}`)}
	isolated := &Runtime{Local: &local.Runtime{}, Isolated: &local.Bwrap{}}
	assert.NoError(t, isolated.CheckTask(sandboxed), "auto sends it to bwrap")
	assert.NoError(t, (&Runtime{Local: &local.Runtime{}, Sandboxes: fakeSandboxes{}}).CheckTask(sandboxed), "or to a container")
	none := (&Runtime{Local: &local.Runtime{}, NoEngine: "no engine"}).CheckTask(sandboxed)
	assert.ErrorAs(t, none, new(*harness.ConfigError), "no sandbox here: refused")
	assert.ErrorContains(t, none, "no engine")

	plain := tasksets.Task{ID: "plain", Verify: "cat /app/out.txt"}
	assert.ErrorAs(t, isolated.CheckTask(plain), new(*hostpaths.Error), "a task without an environment runs locally")

	c, ok := harness.CheckerOf(isolated)
	require.True(t, ok)
	assert.Same(t, isolated, c)
}

// A verifier spec without a workspace is refused whatever sandboxes there
// are: no runtime ran a harness for it.
func TestVerifyRefusesASpecWithoutAWorkspace(t *testing.T) {
	for _, rt := range []*Runtime{
		{Local: &local.Runtime{}},
		{Local: &local.Runtime{}, Sandboxes: fakeSandboxes{}, Isolated: &local.Bwrap{}},
	} {
		_, err := rt.Verify(context.Background(), harness.VerifySpec{Command: "true"})
		assert.EqualError(t, err, "verify: no workspace")
	}
}
