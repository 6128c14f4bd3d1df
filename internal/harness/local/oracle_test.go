package local

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/tasksets"
)

// runTask runs command on task in rt, as an oracle when solution is set,
// then its verifier.
func runTask(t *testing.T, rt verifyingRuntime, task tasksets.Task, command []string, solution string) harness.VerifyResult {
	t.Helper()
	ws, err := harness.PrepareWorkspace(t.TempDir(), task, harness.PrepareOptions{})
	require.NoError(t, err)
	defer func() { assert.NoError(t, ws.Remove()) }()
	res, err := rt.Run(context.Background(), harness.Spec{Key: task.ID, Command: command, Task: task, Workspace: ws, Solution: solution, Timeout: task.AgentTimeout})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "%s: the harness failed: %s", task.ID, res.Stderr)
	got, err := rt.Verify(context.Background(), harness.VerifySpec{
		Key: task.ID, Workspace: ws, Tests: task.Tests, Command: task.Verify, Env: task.VerifierEnv, Timeout: task.VerifierTimeout,
	})
	require.NoError(t, err, "%s: verify", task.ID)
	return got
}

// TestHarborSampleOracle: every bundled task scores 1 with its solution
// and 0 when nothing is done, in the local runtime and in bwrap.
func TestHarborSampleOracle(t *testing.T) {
	ts, err := tasksets.HarborSample()
	require.NoError(t, err)
	for _, r := range runtimes(t) {
		for i := range ts.Len() {
			task, err := ts.Task(context.Background(), i)
			require.NoError(t, err)
			t.Run(r.name+"/"+task.ID, func(t *testing.T) {
				solved := runTask(t, r.rt, task, harness.OracleCommand(), task.Solution)
				assert.Equal(t, 1.0, solved.Reward, "%s with its solution: %s %s", task.ID, solved.Stdout, solved.Stderr)
				idle := runTask(t, r.rt, task, []string{"true"}, "")
				assert.Equal(t, 0.0, idle.Reward, "%s with nothing done", task.ID)
				if task.ID == "release-bundle" {
					assert.Equal(t, map[string]float64{"copied": 1, "manifest": 1, "archive": 1}, solved.Metrics)
					assert.Equal(t, map[string]float64{"copied": 0, "manifest": 0, "archive": 0}, idle.Metrics)
				}
			})
		}
	}
}

func TestOracleWithoutSolution(t *testing.T) {
	res, err := (&Runtime{Dir: t.TempDir(), Grace: 100 * time.Millisecond}).Run(context.Background(), harness.Spec{Key: "k", Command: harness.OracleCommand()})
	require.NoError(t, err)
	assert.NotEqual(t, 0, res.ExitCode)
	assert.Contains(t, res.Stderr, "this task has none")
}
