package container_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/container/containertest"
)

// A multi-step task's steps share one sandbox: the second step's agent
// runs in the container the first step's agent left, after the first
// step's verifier, and the second step's tests find both steps' work.
func TestStepsShareTheirSandbox(t *testing.T) {
	r := containertest.Runtime(t)
	tk := task(t, "testdata/steps", "three-files")
	require.Len(t, tk.Steps, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ws, err := r.PrepareWorkspace("", tk)
	require.NoError(t, err)
	defer func() { assert.NoError(t, ws.Remove()) }()

	for i, step := range tk.Steps {
		st := tk
		st.Prompt = step.Prompt
		res, err := r.Run(ctx, harness.Spec{
			Key: "run-steps/0/0/0", Command: harness.OracleCommand(), BaseURL: "http://127.0.0.1:9", Secret: "s3cret",
			Task: st, Timeout: time.Minute, Workspace: ws, Solution: step.Solution,
		})
		require.NoError(t, err)
		require.Zero(t, res.ExitCode, "step %s: %s", step.Name, res.Stderr)
		tests := tk.Tests
		if step.Tests != "" {
			tests = step.Tests
		}
		v, err := r.Verify(ctx, harness.VerifySpec{Key: "run-steps/0/0/0", Workspace: ws, Tests: tests, Command: tk.Verify, Timeout: time.Minute})
		require.NoError(t, err)
		assert.Equal(t, 1.0, v.Reward, "step %d (%s): %s %s", i, step.Name, v.Stdout, v.Stderr)
	}
}
