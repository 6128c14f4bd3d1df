package temporalcluster

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/results/postgres/pgtest"
	"github.com/evalflow/evalflow/internal/testca"
	"github.com/evalflow/evalflow/internal/wiring"
)

// startTimeout bounds the start of a test's cluster, its retries included.
const startTimeout = 5 * time.Minute

// ForTest starts a cluster for tb as opts say, on the test PostgreSQL
// server (pgtest.ServerURL) when opts name none, its logs in a temp dir
// of tb's when opts.Dir is empty. The end of each service's log goes to
// the test's output when it fails; the cluster stops when the test ends.
func ForTest(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	if opts.PostgresURL == "" {
		opts.PostgresURL = pgtest.ServerURL()
	}
	if opts.Dir == "" {
		opts.Dir = tb.TempDir()
	}
	tb.Cleanup(func() {
		if !tb.Failed() {
			return
		}
		for _, name := range Services {
			log := filepath.Join(opts.Dir, "temporal-"+name+".log")
			tb.Logf("temporal %s (%s)%s", name, log, logTail(log, 40))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := Start(ctx, opts)
	require.NoError(tb, err, "the Temporal server as separate processes (deploy/temporal/config.yaml)")
	tb.Cleanup(c.Stop)
	return c
}

// Dial is a client of the cluster's namespace, as Connection says,
// closed when the test ends.
func (c *Cluster) Dial(tb testing.TB, namespace string) client.Client {
	tb.Helper()
	cl, err := wiring.DialConnection(context.Background(), c.Connection(namespace), slog.New(slog.DiscardHandler), time.Minute)
	require.NoError(tb, err)
	tb.Cleanup(cl.Close)
	return cl
}

// ServerName is the name the frontend's certificate holds in a Secure
// cluster, beside 127.0.0.1.
const ServerName = "temporal.test"

// Secure is a test's cluster with mTLS at its frontend, its certificates
// signed by a certificate authority of the test's own.
type Secure struct {
	*Cluster
	CA *testca.CA
	// Server is the frontend's certificate; Client is the one evalflow's
	// processes present.
	Server, Client testca.Pair
}

// StartSecure is ForTest with mTLS at the frontend (opts.TLS is replaced).
// The CA and the certificates lie in a temp dir of tb's apart from
// opts.Dir, so that a directory of logs holds no key.
func StartSecure(tb testing.TB, opts Options) *Secure {
	tb.Helper()
	ca, err := testca.New(tb.TempDir())
	require.NoError(tb, err)
	server, err := ca.Issue("temporal-server", ServerName, "127.0.0.1")
	require.NoError(tb, err)
	client, err := ca.Issue("evalflow")
	require.NoError(tb, err)
	opts.TLS = &TLS{CAFile: ca.CertFile, CertFile: server.CertFile, KeyFile: server.KeyFile,
		ServerName: ServerName, RequireClientCert: true}
	return &Secure{Cluster: ForTest(tb, opts), CA: ca, Server: server, Client: client}
}

// Flags are the secure-connection flags of an evalflow process (starter,
// worker) that dials the frontend at host, with the client certificate.
func (s *Secure) Flags(host string) []string {
	return []string{"--address", net.JoinHostPort(host, s.Port()), "--tls-ca", s.CA.CertFile,
		"--tls-cert", s.Client.CertFile, "--tls-key", s.Client.KeyFile, "--tls-server-name", ServerName}
}
