package packaged_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/internal/harness/packaged"
	"github.com/evalflow/evalflow/tasksets"
)

// buildCounter builds the counter MCP server, cmd/evalflow-mcp-counter.
func buildCounter(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "evalflow-mcp-counter")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/evalflow/evalflow/cmd/evalflow-mcp-counter").CombinedOutput()
	require.NoError(t, err, "build the counter server: %s", out)
	return bin
}

// TestHarnessesCallTaskToolServers: codex and claude-code, configured by
// evalflow with a task's stdio MCP server (the counter) in their own MCP
// configuration, start it, and it reaches the rollout's /state with the
// secret its harness forwarded, which no configuration file holds;
// claude-code calls its tool three times as the scripted model asks.
// (codex offers MCP tools in a Responses "namespace", which the mock model
// cannot script a call into.)
func TestHarnessesCallTaskToolServers(t *testing.T) {
	counter := buildCounter(t)
	for _, tc := range []struct {
		h        packaged.Harness
		upstream string // the upstream's dialect
		config   string // the MCP configuration evalflow writes, in the session
		calls    int    // the counter the scripted calls leave
	}{
		{packaged.Codex, dialects.NameResponses, "codex-home/config.toml", 0},
		{packaged.ClaudeCode, dialects.NameAnthropic, "mcp.json", 3},
	} {
		t.Run(tc.h.Name, func(t *testing.T) {
			install(t, tc.h)
			rec := &recorder{}
			pool := interception.NewPool(interception.Config{Upstream: scriptedUpstream(t, "mcp-"+tc.h.Name+".jsonl", tc.upstream), OnTurn: rec.add})
			t.Cleanup(func() { assert.NoError(t, pool.Close()) })
			const key = "run/0/0/0"
			slot, err := pool.Acquire(context.Background(), interception.Rollout{Key: key, Model: "mock"})
			require.NoError(t, err)

			task := tasksets.Task{ID: "count", Prompt: "Count to three with the counter tool.",
				Tools: []tasksets.ToolServer{{Name: "counter", Command: []string{counter}}}}
			sessions := t.TempDir()
			peek := &peekRuntime{Runtime: &local.Runtime{Dir: t.TempDir()}, glob: filepath.Join(sessions, "*", tc.config)}
			rt := &packaged.Runtime{Runtime: peek, Installer: installer, Dir: sessions}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := rt.Run(ctx, harness.Spec{
				Key: key, Command: packaged.Command(tc.h, ""), BaseURL: slot.LocalURL, Secret: slot.Secret,
				Model: "mock", Task: task.ForHarness(), MaxTurns: 10, Timeout: 90 * time.Second, OutputLimit: 16 << 10,
			})
			require.NoError(t, err)
			require.Equal(t, 0, res.ExitCode, "stdout: %s\nstderr: %s", res.Stdout, res.Stderr)

			side, ok := slot.Side()
			require.True(t, ok)
			var state struct {
				Counter, PID int
			}
			require.NoError(t, json.Unmarshal(side.State, &state), "the server wrote the state: %s", side.State)
			assert.NotZero(t, state.PID, "the harness started the task's server, which reached /state")
			assert.Equal(t, tc.calls, state.Counter, "the calls of the task's tool reached its server")
			assert.Contains(t, strings.TrimSpace(res.Answer), "The counter is at")

			require.NotEmpty(t, peek.config, "the harness's MCP configuration, as the harness started")
			assert.Contains(t, peek.config, counter, "the configuration names the task's server")
			assert.NotContains(t, peek.config, slot.Secret, "no configuration file holds the rollout's secret")
		})
	}
}

// A task with what a packaged harness cannot run beside it fails as a
// configuration error, before the harness starts.
func TestHarnessesRefuseUsersAndHTTPServers(t *testing.T) {
	for _, task := range []tasksets.Task{
		{ID: "talk", Prompt: "hi", User: &tasksets.User{Command: []string{"user"}}},
		{ID: "http", Prompt: "hi", Tools: []tasksets.ToolServer{{Name: "web", Command: []string{"srv"}, Transport: tasksets.TransportHTTP, Port: 8931}}},
	} {
		for _, h := range []packaged.Harness{packaged.Codex, packaged.ClaudeCode} {
			rt := &packaged.Runtime{Runtime: &local.Runtime{Dir: t.TempDir()}, Installer: installer, Dir: t.TempDir()}
			install(t, h)
			_, err := rt.Run(context.Background(), harness.Spec{Key: "r/0/0/0", Command: packaged.Command(h, ""), BaseURL: "http://127.0.0.1:9", Model: "m", Task: task})
			var cfg *harness.ConfigError
			assert.ErrorAs(t, err, &cfg, "%s with task %s", h.Name, task.ID)
		}
	}
}

// peekRuntime reads the file glob names as a harness starts: the
// configuration evalflow wrote for it, removed with its session after.
type peekRuntime struct {
	harness.Runtime
	glob   string
	config string
}

func (p *peekRuntime) Run(ctx context.Context, spec harness.Spec) (harness.Result, error) {
	if files, _ := filepath.Glob(p.glob); len(files) == 1 {
		b, _ := os.ReadFile(files[0])
		p.config = string(b)
	}
	return p.Runtime.Run(ctx, spec)
}
