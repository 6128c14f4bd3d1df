package container_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/container"
	"github.com/evalflow/evalflow/internal/harness/container/containertest"
	"github.com/evalflow/evalflow/tasksets"
)

// imageRuntime is a container runtime whose task images are the test's
// own, removed when it ends.
func imageRuntime(t *testing.T) *container.Runtime {
	t.Helper()
	r := containertest.Runtime(t)
	container.SetImageRepo(r, fmt.Sprintf("localhost/evalflow-test-build-%d", time.Now().UnixNano()))
	t.Cleanup(func() {
		imgs, _ := r.TaskImages(context.Background())
		for _, img := range imgs {
			_ = r.Engine.RemoveImage(context.Background(), img.Name)
		}
	})
	return r
}

// envTask is a task whose environment directory holds dockerfile and,
// for the verifier, tests that pass.
func envTask(t *testing.T, id, dockerfile, info string) tasksets.Task {
	t.Helper()
	env := filepath.Join(t.TempDir(), id, "environment")
	require.NoError(t, os.MkdirAll(env, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(env, "Dockerfile"), []byte(dockerfile), 0o644))
	tk := tasksets.Task{ID: id, Environment: env}
	if info != "" {
		tk.Info = []byte(info)
	}
	return tk
}

// buildLog is the image-build.log of a result, "" when it has none.
func buildLog(res harness.Result) string {
	for _, l := range res.SessionLogs {
		if l.Name == container.BuildLogName {
			return l.Content
		}
	}
	return ""
}

// A build that fails says why in its error: the last lines of the
// engine's build output, where the failing command's message is, not only
// its exit status. The attempt that met it keeps the whole output.
func TestFailedBuildShowsItsOutput(t *testing.T) {
	r := imageRuntime(t)
	ctx := context.Background()
	tk := envTask(t, "no-such-package", "FROM debian:bookworm-slim\nRUN echo no-such-package-xyz >&2 && exit 100\n", "")

	err := r.Prepare(ctx, tk)
	var ce *harness.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "task no-such-package: the image of")
	assert.Contains(t, err.Error(), "exit status 100")
	assert.Contains(t, err.Error(), "the build's last lines:\n")
	assert.Contains(t, err.Error(), "\n  no-such-package-xyz", "the failing command's own message")

	ws, err := r.PrepareWorkspace("", tk)
	require.NoError(t, err)
	defer ws.Remove()
	res, err := r.Run(ctx, harness.Spec{Key: "build/0/0/0", Command: []string{"true"}, BaseURL: "http://127.0.0.1:9", Task: tk, Workspace: ws})
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, buildLog(res), "no-such-package-xyz", "the attempt's trace keeps the failed build's output")
}

// A build over its build_timeout_sec says so, with what it printed last.
func TestBuildTimeoutShowsItsOutput(t *testing.T) {
	r := imageRuntime(t)
	tk := envTask(t, "slow-build", "FROM debian:bookworm-slim\nRUN echo slow-step-started && sleep 120\n", `{"environment":{"build_timeout_sec":4}}`)
	err := r.Prepare(context.Background(), tk)
	var ce *harness.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "task slow-build: the image build took longer than its build_timeout_sec (4s)")
	assert.Contains(t, err.Error(), "slow-step-started")
}

// A build's output is kept in the trace of the first attempt that runs in
// its image, though the image was built ahead of it (as a run's start
// does), and in no later attempt's.
func TestBuildOutputIsInTheFirstAttemptsTrace(t *testing.T) {
	r := imageRuntime(t)
	ctx := context.Background()
	tk := envTask(t, "built", "FROM debian:bookworm-slim\nRUN echo built-marker-$((6*7))\n", "")
	require.NoError(t, r.Prepare(ctx, tk))

	run := func(key string) harness.Result {
		ws, err := r.PrepareWorkspace("", tk)
		require.NoError(t, err)
		defer ws.Remove()
		res, err := r.Run(ctx, harness.Spec{Key: key, Command: []string{"true"}, BaseURL: "http://127.0.0.1:9", Task: tk, Workspace: ws})
		require.NoError(t, err)
		require.Zero(t, res.ExitCode, res.Stderr)
		return res
	}
	first := run("built/0/0/0")
	log := buildLog(first)
	assert.Contains(t, log, "built-marker-42", "the RUN line's output")
	assert.True(t, strings.Contains(log, "STEP") || strings.Contains(log, "Step"), "the engine's build steps: %s", log)
	assert.Empty(t, buildLog(run("built/0/0/1")), "kept once, not in every trace")
}

// Only environment/docker-compose.yaml (or .yml) makes a task
// multi-container (compose.go); one among the task's data is built into
// the image like any file.
func TestComposeFileAmongTheDataIsBuilt(t *testing.T) {
	r := imageRuntime(t)
	ctx := context.Background()
	tk := envTask(t, "compose-data", "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY app/ ./\n", "")
	require.NoError(t, os.MkdirAll(filepath.Join(tk.Environment, "app"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(tk.Environment, "app", "docker-compose.yml"), []byte("services: {web: {image: nginx}}\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(tk.Environment, "compose.yaml"), []byte("services: {}\n"), 0o644))
	require.NoError(t, r.Prepare(ctx, tk))

	require.NoError(t, os.WriteFile(filepath.Join(tk.Environment, "docker-compose.yml"), []byte("services: {web: {image: x, ports: [\"80:80\"]}}\n"), 0o644))
	err := r.Prepare(ctx, tk)
	var ce *harness.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "task compose-data: environment/docker-compose.yml: service web: ports")
}
