package packaged_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/internal/harness/packaged"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/providers/mock/mocktest"
	"github.com/evalflow/evalflow/tasksets"
	"github.com/evalflow/evalflow/trace"
)

// installer installs into the default cache, so that test runs (and CI,
// caching ~/.cache/evalflow/harnesses) install each version once.
var installer = &packaged.Installer{}

// install installs h, failing with what to do when npm cannot.
func install(t *testing.T, h packaged.Harness) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := installer.Install(ctx, h, h.Version)
	dir, _ := packaged.DefaultCacheDir()
	require.NoError(t, err, "this test runs %s, installed from the npm registry into %s: npm must reach its registry (or that cache must hold %s@%s)",
		h.Name, dir, h.Package, h.Version)
}

// scriptedSlot is an interception slot for key whose upstream, spoken to
// in dialect, is the mock model playing testdata/script, and the recorder
// of its turns.
func scriptedSlot(t *testing.T, script, dialect, key string) (interception.Slot, *recorder) {
	t.Helper()
	rec := &recorder{}
	pool := interception.NewPool(interception.Config{Upstream: scriptedUpstream(t, script, dialect), OnTurn: rec.add})
	t.Cleanup(func() { assert.NoError(t, pool.Close()) })
	slot, err := pool.Acquire(context.Background(), interception.Rollout{Key: key, Model: "mock"})
	require.NoError(t, err)
	return slot.Slot, rec
}

// scriptedUpstream is a client, in dialect, of the mock model playing
// testdata/script.
func scriptedUpstream(t *testing.T, script, dialect string) *providers.Client {
	t.Helper()
	_, url := mocktest.Serve(t, mock.Config{Script: filepath.Join("testdata", script)})
	up, err := providers.New(dialect, url, "upstream-key")
	require.NoError(t, err)
	return up
}

// bundledTask is a task of the bundled Harbor taskset.
func bundledTask(t *testing.T, id string) tasksets.Task {
	t.Helper()
	ts, err := tasksets.HarborSample()
	require.NoError(t, err)
	for i := range ts.Len() {
		task, err := ts.Task(context.Background(), i)
		require.NoError(t, err)
		if task.ID == id {
			return task
		}
	}
	require.FailNow(t, "no bundled task "+id)
	return tasksets.Task{}
}

// recorder collects the turns the interception server records.
type recorder struct {
	mu    sync.Mutex
	turns []trace.Turn
}

func (r *recorder) add(_ string, turn trace.Turn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.turns = append(r.turns, turn)
}

func (r *recorder) all() []trace.Turn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]trace.Turn(nil), r.turns...)
}

// TestHarnessesCompleteBundledTask runs each packaged harness on the
// bundled hello-file task against the scripted mock model through the
// interception server: the CLI's own tool writes the file, the task's
// verifier scores it 1, and the answer, the turns and the CLI's session
// logs are kept. Each CLI runs against an upstream of its own dialect
// (relayed) and of another (its streams translated event by event).
func TestHarnessesCompleteBundledTask(t *testing.T) {
	for _, tc := range []struct {
		h        packaged.Harness
		via      string
		upstream string // the upstream's dialect
		tool     string
		logs     string // a session log's name starts with it
	}{
		{packaged.Codex, "", dialects.NameResponses, "exec_command", "codex-home/sessions/"},
		{packaged.ClaudeCode, "", dialects.NameAnthropic, "Bash", "claude-config/projects/"},
		{packaged.Codex, "/via-anthropic", dialects.NameAnthropic, "exec_command", "codex-home/sessions/"},
		{packaged.ClaudeCode, "/via-chat", dialects.NameChat, "Bash", "claude-config/projects/"},
	} {
		t.Run(tc.h.Name+tc.via, func(t *testing.T) {
			install(t, tc.h)
			const key = "run/0/0/0"
			slot, rec := scriptedSlot(t, tc.h.Name+".jsonl", tc.upstream, key)

			task := bundledTask(t, "hello-file")
			ws, err := harness.PrepareWorkspace(t.TempDir(), task, harness.PrepareOptions{})
			require.NoError(t, err)
			host := &local.Runtime{Dir: t.TempDir()}
			rt := &packaged.Runtime{Runtime: host, Installer: installer, Dir: t.TempDir()}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := rt.Run(ctx, harness.Spec{
				Key: key, Command: packaged.Command(tc.h, ""), BaseURL: slot.LocalURL, Secret: slot.Secret,
				Model: "mock", Task: task.ForHarness(), MaxTurns: 10, Timeout: 90 * time.Second,
				OutputLimit: 16 << 10, Workspace: ws,
			})
			require.NoError(t, err)
			turns := rec.all()
			require.Equal(t, 0, res.ExitCode, "stdout: %s\nstderr: %s", res.Stdout, res.Stderr)

			hello, err := os.ReadFile(filepath.Join(ws.Dir, "hello.txt"))
			require.NoError(t, err, "the CLI's %s tool wrote hello.txt into the workspace", tc.tool)
			assert.Equal(t, "Hello, evalflow!\n", string(hello))
			assert.Equal(t, "Created hello.txt.", strings.TrimSpace(res.Answer))

			verdict, err := host.Verify(ctx, harness.VerifySpec{Key: key, Workspace: ws, Tests: task.Tests, Command: task.Verify, Timeout: time.Minute})
			require.NoError(t, err)
			assert.Equal(t, 1.0, verdict.Reward, "the task's own verifier accepts the workspace")

			var called []string
			for _, turn := range turns {
				for _, m := range turn.Response.Message.ToolCalls {
					called = append(called, m.Name)
				}
			}
			assert.Contains(t, called, tc.tool, "the scripted tool call went through the interception server")
			require.GreaterOrEqual(t, len(turns), 2)
			last := turns[len(turns)-1].Request.Messages
			var results []string
			for _, m := range last {
				if m.Role == dialects.RoleTool {
					results = append(results, m.Text())
				}
			}
			assert.NotEmpty(t, results, "the CLI sent its tool's result back to the model")
			for _, turn := range turns {
				if turn.Response.Message.Role != "" {
					assert.True(t, turn.Streamed, "the CLI streams its model calls")
					assert.Empty(t, turn.Error)
				}
			}

			var names []string
			for _, l := range res.SessionLogs {
				names = append(names, l.Name)
				assert.NotContains(t, l.Content, slot.Secret, "no session log holds the rollout's secret")
			}
			require.NotEmpty(t, names, "the CLI's session logs are kept")
			assert.True(t, strings.HasPrefix(names[0], tc.logs), "session logs %v", names)
			assert.Contains(t, res.SessionLogs[0].Content, "hello.txt", "the transcript holds the task")
		})
	}
}
