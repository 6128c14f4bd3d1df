package faults

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/wiring"
)

// server is a Temporal server running as its own process (starter dev,
// without a worker), persisted to dataDir so a restart keeps every run.
type server struct {
	addr    string
	dataDir string
	proc    *proc
}

// newServer is a server on a free loopback address, persisted to dataDir,
// not started yet.
func newServer(t *testing.T, dataDir string) *server {
	t.Helper()
	return &server{addr: devtest.FreeAddr(t), dataDir: dataDir}
}

// startServer starts a server persisted to a directory of the case's.
func startServer(t *testing.T) *server {
	t.Helper()
	s := newServer(t, caseDir(t))
	s.start(t)
	return s
}

// start runs the server process and waits until its frontend answers.
func (s *server) start(t *testing.T) {
	t.Helper()
	p := spawn(t, "starter", "dev", "--worker=false", "--address", s.addr, "--data-dir", s.dataDir, "--ui-port", "-1")
	s.proc = p
	c := dial(t, s.addr)
	c.Close()
	// Before the process goes (cleanups run last first), its histories go
	// to the secret scan, whether the case passed or not; a server started
	// again on the same data dumps them itself, and one that died has its
	// data directory scanned still.
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			if s.proc == p {
				dumpHistories(t, s.addr)
			}
		}
	})
}

// dial connects to the server at addr once its frontend answers.
func dial(t *testing.T, addr string) client.Client {
	t.Helper()
	var c client.Client
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		c, err = wiring.Dial(ctx, addr, "default", slog.New(slog.DiscardHandler), 10*time.Second)
		return err == nil
	}, 2*time.Minute, 100*time.Millisecond, "the Temporal server at %s answers", addr)
	return c
}
