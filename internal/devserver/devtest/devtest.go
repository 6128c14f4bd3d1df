// Package devtest starts the embedded Temporal server for tests: on free
// ports (again on others when one is taken before the server binds it),
// stopped when the test ends, with a client of it.
package devtest

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/evalflow/evalflow/internal/devserver"
	"github.com/evalflow/evalflow/internal/namespace"
)

// startTimeout bounds a start, its tries on other ports included.
const startTimeout = 2 * time.Minute

// Start starts an embedded server for tb as cfg says, but on a free
// frontend port (devserver.StartOnFreePort); an empty DataDir is a temp
// dir of tb's, and a zero UIPort is no Web UI. The server stops when the
// test ends.
func Start(tb testing.TB, cfg devserver.Config) *devserver.Server {
	tb.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = tb.TempDir()
	}
	if cfg.UIPort == 0 {
		cfg.UIPort = -1
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	srv, err := devserver.StartOnFreePort(ctx, cfg)
	require.NoError(tb, err, "start the embedded Temporal server")
	tb.Cleanup(func() { _ = srv.Stop() })
	return srv
}

// StartEvalflow starts a server for tb whose default namespace has
// evalflow's search attributes, as evalflow's runs need, and returns it
// with a client of that namespace.
func StartEvalflow(tb testing.TB) (*devserver.Server, client.Client) {
	tb.Helper()
	srv := Start(tb, devserver.Config{SearchAttributes: namespace.Attributes()})
	return srv, Dial(tb, srv)
}

// Dial is a client of srv's default namespace, closed when the test ends.
func Dial(tb testing.TB, srv *devserver.Server) client.Client {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{
		HostPort:  srv.Address(),
		Namespace: devserver.DefaultNamespace,
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	require.NoError(tb, err, "dial the embedded Temporal server at %s", srv.Address())
	tb.Cleanup(c.Close)
	return c
}

// FreePort is a free loopback port outside the kernel's ephemeral range
// (devserver.FreePort), for a server a test starts as a process of its own.
func FreePort(tb testing.TB) int {
	tb.Helper()
	port, err := devserver.FreePort(devserver.DefaultIP)
	require.NoError(tb, err)
	return port
}

// FreeAddr is FreePort's loopback address, host:port.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	return net.JoinHostPort(devserver.DefaultIP, strconv.Itoa(FreePort(tb)))
}
