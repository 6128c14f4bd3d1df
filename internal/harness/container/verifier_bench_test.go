package container

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/agenttest"
	"github.com/evalflow/evalflow/internal/engine/enginetest"
	"github.com/evalflow/evalflow/internal/harness/container/keeper"
	"github.com/evalflow/evalflow/tasksets"
)

// BenchmarkVerifier is what grading costs a rollout, the sandbox already
// started and its harness done: the verifier executed in the agent's own
// sandbox with the tests copied in (the baseline: what a shared verifier
// costs when nothing isolates it), against the verifier in a container of
// its own on a snapshot of the sandbox (shared mode), and in a fresh
// sandbox of its own image fed the artifacts (separate mode).
func BenchmarkVerifier(b *testing.B) {
	r := &Runtime{Engine: enginetest.Client(b), Agent: agenttest.Agent(b), Dir: b.TempDir(), Worker: "bench"}
	dir := b.TempDir()
	for _, d := range []string{"environment", "tests"} {
		require.NoError(b, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	require.NoError(b, os.WriteFile(filepath.Join(dir, "environment", "Dockerfile"), []byte("FROM debian:bookworm-slim\nWORKDIR /app\n"), 0o644))
	require.NoError(b, os.WriteFile(filepath.Join(dir, "tests", "test.sh"), []byte("#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n"), 0o755))
	shared := tasksets.Task{ID: "bench-verifier", Prompt: "x", Environment: filepath.Join(dir, "environment"), Tests: filepath.Join(dir, "tests")}
	separate := shared
	separate.Info = []byte(`{"verifier":{"environment_mode":"separate"},"artifacts":["/app/answer.txt"]}`)
	ctx := context.Background()
	require.NoError(b, r.Prepare(ctx, shared))

	// run starts a rollout's sandbox and runs its harness, untimed, then
	// grades it with verify, timed.
	run := func(b *testing.B, task tasksets.Task, verify func(*harness.Workspace) float64) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			ws, err := r.PrepareWorkspace("", task)
			require.NoError(b, err)
			res, err := r.Run(ctx, harness.Spec{Key: fmt.Sprintf("bench/0/%d/0", i), Command: []string{"sh", "-c", "echo 42 > /app/answer.txt"}, BaseURL: "http://127.0.0.1:9", Task: task, Workspace: ws})
			require.NoError(b, err)
			require.Zero(b, res.ExitCode, res.Stderr)
			b.StartTimer()
			require.Equal(b, 1.0, verify(ws))
			b.StopTimer()
			require.NoError(b, ws.Remove())
			b.StartTimer()
		}
	}
	spec := func(ws *harness.Workspace) harness.VerifySpec {
		return harness.VerifySpec{Key: "bench", Workspace: ws, Tests: shared.Tests, Command: "sh /tests/test.sh"}
	}
	b.Run("in-sandbox", func(b *testing.B) {
		run(b, shared, func(ws *harness.Workspace) float64 {
			sb := ws.Sandbox().(*sandbox)
			require.NoError(b, r.Engine.CopyDirIn(ctx, sb.id, shared.Tests, TestsDir))
			res, err := sb.exec(ctx, keeper.Request{Argv: []string{"sh", "-c", "mkdir -p /logs/agent/v && echo 1 > /logs/agent/v/reward.txt"}, Dir: sb.workdir}, 0, 0)
			require.NoError(b, err)
			v, err := harness.Verdict(res, 0, filepath.Join(ws.Logs, harness.AgentLogs, "v"))
			require.NoError(b, err)
			return v.Reward
		})
	})
	b.Run("snapshot", func(b *testing.B) {
		run(b, shared, func(ws *harness.Workspace) float64 {
			v, err := r.Verify(ctx, spec(ws))
			require.NoError(b, err)
			return v.Reward
		})
	})
	b.Run("separate", func(b *testing.B) {
		run(b, separate, func(ws *harness.Workspace) float64 {
			v, err := r.Verify(ctx, spec(ws))
			require.NoError(b, err)
			return v.Reward
		})
	})
}
