package packaged_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/container/containertest"
	"github.com/evalflow/evalflow/internal/harness/packaged"
)

// codex and claude-code complete a workspace task inside a container
// sandbox of the task's image (which holds no Node): their native
// programs run there, mounted read-only at their host paths, their
// session directories beside them; the verifier, in the same sandbox,
// scores the work 1.
func TestHarnessesCompleteATaskInAContainer(t *testing.T) {
	for _, tc := range []struct {
		h        packaged.Harness
		upstream string // the upstream's dialect
		logs     string
	}{
		{packaged.Codex, dialects.NameResponses, "codex-home/sessions/"},
		{packaged.ClaudeCode, dialects.NameAnthropic, "claude-config/projects/"},
	} {
		t.Run(tc.h.Name, func(t *testing.T) {
			install(t, tc.h)
			const key = "sandboxed/0/0/0"
			slot, rec := scriptedSlot(t, tc.h.Name+".jsonl", tc.upstream, key)

			task := bundledTask(t, "hello-file")
			sandboxes := containertest.Runtime(t)
			ws, err := sandboxes.PrepareWorkspace("", task)
			require.NoError(t, err)
			defer func() { assert.NoError(t, ws.Remove()) }()
			rt := &packaged.Runtime{Runtime: sandboxes, Installer: installer, Dir: t.TempDir()}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			res, err := rt.Run(ctx, harness.Spec{
				Key: key, Command: packaged.Command(tc.h, ""), BaseURL: slot.LocalURL, Secret: slot.Secret,
				Model: "mock", Task: task, MaxTurns: 10, Timeout: 2 * time.Minute, OutputLimit: 16 << 10, Workspace: ws,
			})
			require.NoError(t, err)
			require.Equal(t, 0, res.ExitCode, "stdout: %s\nstderr: %s", res.Stdout, res.Stderr)
			assert.Equal(t, "Created hello.txt.", strings.TrimSpace(res.Answer))
			require.NotNil(t, ws.Sandbox(), "the sandbox waits for the verifier")

			verdict, err := sandboxes.Verify(ctx, harness.VerifySpec{Key: key, Workspace: ws, Tests: task.Tests, Command: task.Verify, Timeout: time.Minute})
			require.NoError(t, err)
			assert.Equal(t, 1.0, verdict.Reward, "the verifier, in the same sandbox, finds hello.txt: %s %s", verdict.Stdout, verdict.Stderr)

			turns := rec.all()
			require.NotEmpty(t, turns, "the CLI's model calls went through the interception from inside the sandbox")
			var logs []string
			for _, l := range res.SessionLogs {
				logs = append(logs, l.Name)
			}
			assert.True(t, slices.ContainsFunc(logs, func(n string) bool { return strings.HasPrefix(n, tc.logs) }),
				"session logs %v kept from the mounted session directory", logs)
		})
	}
}
