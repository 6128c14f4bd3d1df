package container_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/container/containertest"
	"github.com/evalflow/evalflow/tasksets"
)

// BenchmarkSandbox is a rollout's sandbox overhead: start, the harness
// executed, the verifier executed, stop; against `podman run --rm IMAGE
// true` on the same engine (one container, one process), the floor.
func BenchmarkSandbox(b *testing.B) {
	r := containertest.Runtime(b)
	dir := b.TempDir()
	env := filepath.Join(dir, "environment")
	require.NoError(b, os.MkdirAll(env, 0o755))
	require.NoError(b, os.WriteFile(filepath.Join(env, "Dockerfile"), []byte("FROM debian:bookworm-slim\nWORKDIR /app\n"), 0o644))
	task := tasksets.Task{ID: "bench", Prompt: "x", Environment: env, Verify: "echo 1 > /logs/verifier/reward.txt"}
	ctx := context.Background()
	require.NoError(b, r.Prepare(ctx, task))
	b.Run("rollout", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			ws, err := r.PrepareWorkspace("", task)
			require.NoError(b, err)
			res, err := r.Run(ctx, harness.Spec{Key: fmt.Sprintf("bench/0/%d/0", i), Command: []string{"true"}, BaseURL: "http://127.0.0.1:9", Task: task, Workspace: ws})
			require.NoError(b, err)
			require.Zero(b, res.ExitCode)
			v, err := r.Verify(ctx, harness.VerifySpec{Key: "bench", Workspace: ws, Command: task.Verify})
			require.NoError(b, err)
			require.Equal(b, 1.0, v.Reward)
			require.NoError(b, ws.Remove())
		}
	})
	b.Run("podman-run-rm", func(b *testing.B) {
		for b.Loop() {
			out, err := exec.Command("podman", "run", "--rm", "--network", "none", "docker.io/library/debian:bookworm-slim", "true").CombinedOutput()
			require.NoError(b, err, "%s", out)
		}
	})
}

// BenchmarkImage is a task's image found in the cache (same build
// context) against built anew (a context that differs by one file).
func BenchmarkImage(b *testing.B) {
	r := containertest.Runtime(b)
	ctx := context.Background()
	dir := b.TempDir()
	write := func(content string) tasksets.Task {
		require.NoError(b, os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM debian:bookworm-slim\nWORKDIR /app\nCOPY stamp /app/stamp\n"), 0o644))
		require.NoError(b, os.WriteFile(filepath.Join(dir, "stamp"), []byte(content), 0o644))
		return tasksets.Task{ID: "bench-image", Environment: dir}
	}
	task := write("hit")
	require.NoError(b, r.Prepare(ctx, task))
	b.Run("hit", func(b *testing.B) {
		for b.Loop() {
			require.NoError(b, r.Prepare(ctx, task))
		}
	})
	b.Run("miss", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			require.NoError(b, r.Prepare(ctx, write(fmt.Sprintf("miss-%d-%d", time.Now().UnixNano(), i))))
		}
	})
}
