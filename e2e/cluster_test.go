package e2e

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/devserver"
	"github.com/evalflow/evalflow/internal/namespace"
	"github.com/evalflow/evalflow/internal/wiring"
)

// startServer starts an embedded Temporal server on free ports in a temp dir.
func startServer(t testing.TB) (*devserver.Server, client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var srv *devserver.Server
	var err error
	// A free port may be taken again before the server binds it (other
	// packages' tests run beside this one): pick another.
	for range 5 {
		srv, err = devserver.Start(ctx, devserver.Config{
			DataDir:          t.TempDir(),
			Port:             freePort(t),
			UIPort:           -1,
			SearchAttributes: namespace.Attributes(),
		})
		if !errors.Is(err, syscall.EADDRINUSE) && !errors.Is(err, devserver.ErrStartFailed) {
			break
		}
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	c, err := wiring.Dial(ctx, srv.Address(), "default", slog.New(slog.DiscardHandler), time.Minute)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return srv, c
}

func freePort(t testing.TB) int {
	t.Helper()
	// Outside the ephemeral range: no other program's connection takes it
	// before the server binds it.
	port, err := devserver.FreePort("127.0.0.1")
	require.NoError(t, err)
	return port
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
	return &recordingRuntime{inner: &harness.Local{}, runs: map[string]int{}}
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

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
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
