package activities_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/internal/harness/packaged"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/providers/mock/mocktest"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
)

// codex and claude-code, real CLIs, whose scripted model keeps asking for
// tool calls, are refused by the interception server past the run's
// --max-turns: the rollout ends as limit:turns, read from the stored
// trace's refused turn, whatever the CLI made of the refusal (claude-code's
// own --max-turns is only a safety bound above the run's).
func TestRunEndsPackagedHarnessesAtTheTurnLimit(t *testing.T) {
	for _, tc := range []struct {
		h        packaged.Harness
		upstream string // the upstream's dialect
		script   string
	}{
		{packaged.Codex, dialects.NameResponses,
			`{"match":"","turns":[{"tool_calls":[{"name":"exec_command","arguments":{"cmd":"echo still working"}}]}]}`},
		{packaged.ClaudeCode, dialects.NameAnthropic,
			`{"match":"","turns":[{"tool_calls":[{"name":"Bash","arguments":{"command":"echo still working","description":"Keep working"}}]}]}`},
	} {
		t.Run(tc.h.Name, func(t *testing.T) {
			installer := &packaged.Installer{}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			_, err := installer.Install(ctx, tc.h, tc.h.Version)
			dir, _ := packaged.DefaultCacheDir()
			require.NoError(t, err, "this test runs %s, installed from the npm registry into %s", tc.h.Name, dir)

			script := filepath.Join(t.TempDir(), "script.jsonl")
			require.NoError(t, os.WriteFile(script, []byte(tc.script+"\n"), 0o644))
			_, url := mocktest.Serve(t, mock.Config{Script: script})
			up, err := providers.New(tc.upstream, url, "upstream-key")
			require.NoError(t, err)

			rt := &packaged.Runtime{Runtime: &local.Runtime{Dir: t.TempDir()}, Installer: installer, Dir: t.TempDir()}
			r := newRigWith(t, up, fakeRuntime(rt.Run))
			ref := ref(1)
			ref.Harness = rollout.HarnessConfig{Command: packaged.Command(tc.h, ""), Timeout: 2 * time.Minute, MaxTurns: 3}

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
			assert.Equal(t, 3, served, "the CLI's calls up to the limit were served")
			assert.GreaterOrEqual(t, limited, 1, "its call past the limit was refused and recorded")
			require.NotEmpty(t, tr.Harness.SessionLogs, "the CLI ran: its session log is kept")
		})
	}
}
