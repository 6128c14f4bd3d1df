package activities_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/harness/packaged"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
)

// codex, a real CLI, whose scripted model keeps asking for tool calls, is
// refused by the interception server past the run's --max-turns: the
// rollout ends as limit:turns, read from the stored trace's refused turn,
// whatever codex made of the refusal.
func TestRunEndsCodexAtTheTurnLimit(t *testing.T) {
	installer := &packaged.Installer{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := installer.Install(ctx, packaged.Codex, packaged.Codex.Version)
	dir, _ := packaged.DefaultCacheDir()
	require.NoError(t, err, "this test runs codex, installed from the npm registry into %s", dir)

	script := filepath.Join(t.TempDir(), "script.jsonl")
	require.NoError(t, os.WriteFile(script, []byte(
		`{"match":"","turns":[{"tool_calls":[{"name":"exec_command","arguments":{"cmd":"echo still working"}}]}]}`+"\n"), 0o644))
	model, err := mock.New(mock.Config{Script: script})
	require.NoError(t, err)
	up := httptest.NewServer(model)
	t.Cleanup(up.Close)

	rt := &packaged.Runtime{Runtime: &harness.Local{Dir: t.TempDir()}, Installer: installer, Dir: t.TempDir()}
	r := newRigWith(t, providers.NewResponses(up.URL+"/v1", "upstream-key"), fakeRuntime(rt.Run))
	ref := ref(1)
	ref.Harness = rollout.HarnessConfig{Command: packaged.Command(packaged.Codex, ""), Timeout: 2 * time.Minute, MaxTurns: 3}

	s, err := r.rollout(t, ref)
	require.NoError(t, err, "a limit is the agent's result, not an error")
	assert.Equal(t, rollout.StatusError, s.Status)
	assert.Equal(t, rollout.KindLimit+trace.LimitTurns, s.ErrorKind)

	rec, ok, err := r.store.Get(context.Background(), "run", s.Key)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, rollout.KindLimit+trace.LimitTurns, rec.ErrorKind, "the stored record's kind")
	tr, err := r.store.Trace(context.Background(), "run", s.Key)
	require.NoError(t, err)
	var limited, served int
	for _, turn := range tr.Turns {
		if turn.Limit != "" {
			assert.Equal(t, trace.LimitTurns, turn.Limit)
			assert.Equal(t, 400, turn.Status)
			limited++
			continue
		}
		served++
		assert.Equal(t, 200, turn.Status)
	}
	assert.Equal(t, 3, served, "codex made the calls up to its limit")
	assert.GreaterOrEqual(t, limited, 1, "codex's call past the limit was refused and recorded")
	require.NotEmpty(t, tr.Harness.SessionLogs, "codex ran: its session log is kept")
}
