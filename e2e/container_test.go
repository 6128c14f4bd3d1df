package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/engine/enginetest"
	"github.com/evalflow/evalflow/internal/harness/container"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/tasksets"
)

// containerRuntime is the container runtime on the test engine, with the
// tests' built-in agent mounted into every sandbox.
func containerRuntime(t testing.TB) *container.Runtime {
	t.Helper()
	return &container.Runtime{Engine: enginetest.Client(t), Agent: agentCommand[0], Dir: t.TempDir(), Worker: "e2e"}
}

// requireNoSandboxLeft fails when a sandbox of the run is left on the engine.
func requireNoSandboxLeft(t *testing.T, rt *container.Runtime, runID string) {
	t.Helper()
	left, err := rt.Engine.ListContainers(context.Background(), container.LabelRun+"="+runID)
	require.NoError(t, err)
	require.Empty(t, left, "every sandbox is removed once its rollout is done")
}

func runID(t *testing.T) string {
	return "harbor-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
}

// The bundled sample in containers of its tasks' own images, on a real
// engine: the oracle scores 1 on every task and doing nothing 0, each
// verified in the sandbox the harness ran in.
func TestContainerHarborSample(t *testing.T) {
	t.Parallel()
	n := harborSampleLen(t)
	t.Run("oracle", func(t *testing.T) {
		rt := containerRuntime(t)
		got := runHarbor(t, harborRun{taskset: tasksets.HarborSampleName, runtime: rt, harness: rollout.HarnessConfig{Oracle: true}})
		require.Zero(t, got.res.Failed, "%+v", got.res.FailedSamples)
		require.Len(t, got.records, n)
		for id, rec := range got.records {
			assert.Equal(t, 1.0, rec.Reward, "%s with its solution", id)
		}
		assert.Equal(t, n, got.scheduled[rollout.ActivityVerify])
		requireNoWorkspaceLeft(t, got.workDir)
		requireNoSandboxLeft(t, rt, runID(t))
	})
	t.Run("nothing", func(t *testing.T) {
		rt := containerRuntime(t)
		got := runHarbor(t, harborRun{taskset: tasksets.HarborSampleName, runtime: rt, harness: rollout.HarnessConfig{Command: []string{"true"}}})
		require.Zero(t, got.res.Failed, "%+v", got.res.FailedSamples)
		require.Len(t, got.records, n)
		for id, rec := range got.records {
			assert.Equal(t, rollout.StatusOK, rec.Status, id)
			assert.Equal(t, 0.0, rec.Reward, "%s with nothing done", id)
		}
		requireNoSandboxLeft(t, rt, runID(t))
	})
}

// Tasks shaped like Terminal-Bench's: a package from a RUN line the tests
// need, state outside /app, the image's own COPY and RUN: the oracle
// scores 1, doing nothing 0, and a task over its memory_mb is the agent's
// failure "oom". (Services left running: harness/container's isolation
// tests.)
func TestContainerTerminalBenchShapedTasks(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs("../internal/harness/container/testdata/tb-shaped")
	require.NoError(t, err)
	t.Run("oracle", func(t *testing.T) {
		rt := containerRuntime(t)
		got := runHarbor(t, harborRun{taskset: dir, runtime: rt, harness: rollout.HarnessConfig{Oracle: true}, maxAttempts: 1})
		require.Len(t, got.records, 4)
		for id, rec := range got.records {
			if id == "memory-hog" {
				assert.Equal(t, rollout.StatusError, rec.Status)
				assert.Equal(t, rollout.KindOOM, rec.ErrorKind, "over its memory_mb: the agent's failure")
				continue
			}
			assert.Equal(t, 1.0, rec.Reward, "%s with its solution: %s", id, rec.Error)
		}
		requireNoSandboxLeft(t, rt, runID(t))
	})
	t.Run("nothing", func(t *testing.T) {
		rt := containerRuntime(t)
		got := runHarbor(t, harborRun{taskset: dir, runtime: rt, harness: rollout.HarnessConfig{Command: []string{"true"}}})
		require.Len(t, got.records, 4)
		for id, rec := range got.records {
			assert.Equal(t, rollout.StatusOK, rec.Status, id)
			assert.Equal(t, 0.0, rec.Reward, "%s with nothing done", id)
		}
		requireNoSandboxLeft(t, rt, runID(t))
	})
}

// The built-in agent, driven by a scripted mock model, works inside the
// tasks' containers: its tool calls run there, and the verifier finds its
// work in the same sandbox.
func TestContainerScriptedAgent(t *testing.T) {
	t.Parallel()
	script, err := filepath.Abs("testdata/harbor-agent.jsonl")
	require.NoError(t, err)
	rt := containerRuntime(t)
	got := runHarbor(t, harborRun{taskset: tasksets.HarborSampleName, runtime: rt, script: script})
	// The shell tool ran in the sandbox: its output went back to the model.
	assertScriptedOutcome(t, got)
	requireNoSandboxLeft(t, rt, runID(t))
}
