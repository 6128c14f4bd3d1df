package container_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/container/containertest"
)

// /logs/artifacts is a directory of the host in the sandbox and in the
// verifier's container: what the agent leaves there the verifier reads,
// and what both leave is on the host for the attempt's trace.
func TestArtifactsAreOnTheHost(t *testing.T) {
	r := containertest.Runtime(t)
	tk := task(t, "testdata/artifacts", "keep")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ws, err := r.PrepareWorkspace("", tk)
	require.NoError(t, err)
	defer func() { assert.NoError(t, ws.Remove()) }()

	res, err := r.Run(ctx, harness.Spec{
		Key: "run-artifacts/0/0/0", Command: []string{"sh", "-c", "echo from the agent > /logs/artifacts/report.txt"},
		BaseURL: "http://127.0.0.1:9", Secret: "s3cret", Task: tk, Timeout: time.Minute, Workspace: ws,
	})
	require.NoError(t, err)
	require.Zero(t, res.ExitCode, res.Stderr)
	v, err := r.Verify(ctx, harness.VerifySpec{Key: "run-artifacts/0/0/0", Workspace: ws, Tests: tk.Tests, Command: tk.Verify, Timeout: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, 1.0, v.Reward, "%s %s", v.Stdout, v.Stderr)
	assert.Equal(t, "from the agent\n", v.Stdout, "the verifier reads the agent's artifacts")

	dir := filepath.Join(ws.Logs, harness.ArtifactLogs)
	for name, want := range map[string]string{"report.txt": "from the agent\n", "verdict.txt": "graded\n"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err, name)
		assert.Equal(t, want, string(b), name)
	}
}
