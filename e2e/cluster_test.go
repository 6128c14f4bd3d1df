package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/providers/mock"
)

// skipShort skips an end-to-end run on the embedded server under -short.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end run on the embedded server")
	}
}

// startWorker starts a worker of cfg on c, stopped when the test ends. Its
// harness is the built-in agent, its runs directory a temp dir of the
// test's and its log discarded unless cfg says otherwise.
func startWorker(t testing.TB, c client.Client, cfg wiring.Config) *wiring.Worker {
	t.Helper()
	if cfg.DefaultHarness == nil {
		cfg.DefaultHarness = agentCommand
	}
	if cfg.RunsDir == "" {
		cfg.RunsDir = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	w, err := wiring.NewWorker(c, cfg)
	require.NoError(t, err)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return w
}

// bwrapRuntime is the bwrap runtime with the tests' built-in agent, its
// workspaces in a temp dir of the test's. It fails the test where
// bubblewrap is not installed.
func bwrapRuntime(t testing.TB) *local.Bwrap {
	t.Helper()
	_, err := exec.LookPath("bwrap")
	require.NoError(t, err, "the bwrap runtime needs bubblewrap: apt-get install bubblewrap")
	return &local.Bwrap{Agent: agentCommand[0], Local: local.Runtime{Dir: t.TempDir()}}
}

const providerKey = "sk-e2e-provider-key-0f9a8b7c6d5e"

// provider is the upstream model: the offline mock of cfg behind a check
// of the worker's API key. It counts the calls with another key.
func provider(t *testing.T, cfg mock.Config) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	m, err := mock.New(cfg)
	require.NoError(t, err)
	var badAuth atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+providerKey {
			badAuth.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"message":"bad key","type":"invalid_request_error"}}`)
			return
		}
		m.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &badAuth
}

// recordingRuntime runs harnesses locally and remembers every rollout key
// and secret it was handed.
type recordingRuntime struct {
	inner   harness.Runtime
	mu      sync.Mutex
	runs    map[string]int
	secrets []string
}

func newRecordingRuntime() *recordingRuntime {
	return &recordingRuntime{inner: &local.Runtime{}, runs: map[string]int{}}
}

func (r *recordingRuntime) Run(ctx context.Context, spec harness.Spec) (harness.Result, error) {
	r.mu.Lock()
	r.runs[spec.Key]++
	r.secrets = append(r.secrets, spec.Secret)
	r.mu.Unlock()
	return r.inner.Run(ctx, spec)
}

func (r *recordingRuntime) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[key]
}

func (r *recordingRuntime) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.runs {
		n += c
	}
	return n
}

func (r *recordingRuntime) allSecrets() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.secrets...)
}

// histories returns every history of a workflow id's continue-as-new chain,
// starting from firstRunID, as protojson text.
func histories(t *testing.T, c client.Client, id, firstRunID string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for runID := firstRunID; runID != ""; {
		h := &historypb.History{}
		it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		next := ""
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			h.Events = append(h.Events, ev)
			if can := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); can != nil {
				next = can.GetNewExecutionRunId()
			}
		}
		b, err := protojson.Marshal(h)
		require.NoError(t, err)
		out = append(out, string(b))
		runID = next
	}
	return out
}

// requireNoSecret fails when any text holds any secret.
func requireNoSecret(t *testing.T, where string, texts []string, secrets []string) {
	t.Helper()
	for i, text := range texts {
		for _, s := range secrets {
			require.NotEmpty(t, s)
			if strings.Contains(text, s) {
				t.Fatalf("%s #%d contains a secret (%.6s…)", where, i, s)
			}
		}
	}
}

// writeHistory saves a history for the workflows package's replay tests
// into the directory EVALFLOW_WRITE_HISTORY names.
func writeHistory(t *testing.T, name, text string) {
	dir := os.Getenv("EVALFLOW_WRITE_HISTORY")
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	t.Logf("wrote %s", filepath.Join(dir, name))
}
