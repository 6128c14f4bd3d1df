package wiring

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common/authorization"

	"github.com/evalflow/evalflow/internal/devserver"
	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/namespace"
	"github.com/evalflow/evalflow/internal/testca"
)

// startTLSServer starts an embedded server whose frontend speaks TLS with a
// certificate for temporal.test and 127.0.0.1, signed by a CA of the test's.
func startTLSServer(t *testing.T, mutual bool, auth *keyAuth) (*devserver.Server, *testca.CA) {
	t.Helper()
	dir := t.TempDir()
	ca, err := testca.New(dir)
	require.NoError(t, err)
	server, err := ca.Issue("temporal-server", "temporal.test", "127.0.0.1")
	require.NoError(t, err)
	cfg := devserver.Config{
		UIPort: -1,
		TLS: &devserver.TLS{CAFile: ca.CertFile, CertFile: server.CertFile, KeyFile: server.KeyFile,
			RequireClientCert: mutual, ServerName: "temporal.test"},
	}
	if auth != nil {
		cfg.Authorizer, cfg.ClaimMapper = auth, auth
	}
	return devtest.Start(t, cfg), ca
}

func TestDialMutualTLS(t *testing.T) {
	srv, ca := startTLSServer(t, true, nil)
	client, err := ca.Issue("evalflow-worker")
	require.NoError(t, err)
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	good := Connection{Address: srv.Address(), Namespace: "default", TLSCA: ca.CertFile, TLSCert: client.CertFile, TLSKey: client.KeyFile}

	c, err := DialConnection(ctx, good, log, 30*time.Second)
	require.NoError(t, err, "the client certificate signed by the CA is accepted")
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
	require.NoError(t, err)
	c.Close()

	noCert := good
	noCert.TLSCert, noCert.TLSKey = "", ""
	_, err = DialConnection(ctx, noCert, log, 10*time.Second)
	require.Error(t, err, "mTLS refuses a client without a certificate")

	plain := Connection{Address: srv.Address(), Namespace: "default"}
	_, err = DialConnection(ctx, plain, log, 10*time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "TLS", "a plain client is told the frontend may want TLS")

	noCA := good
	noCA.TLSCA = ""
	_, err = DialConnection(ctx, noCA, log, 10*time.Second)
	require.Error(t, err, "the system roots do not know the test's CA")
	assert.Contains(t, err.Error(), "--tls-ca")
}

func TestDialTLSServerName(t *testing.T) {
	srv, ca := startTLSServer(t, false, nil)
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	// localhost is not a name in the server's certificate.
	port := srv.Address()[strings.LastIndex(srv.Address(), ":"):]
	conn := Connection{Address: "localhost" + port, Namespace: "default", TLSCA: ca.CertFile}
	_, err := DialConnection(ctx, conn, log, 10*time.Second)
	require.Error(t, err, "the certificate does not name localhost")

	conn.TLSServerName = "temporal.test"
	c, err := DialConnection(ctx, conn, log, 30*time.Second)
	require.NoError(t, err, "--tls-server-name checks the certificate against its name")
	c.Close()
}

// keyAuth admits callers that present the API key, and the server's own
// system worker (by its certificate); it refuses everyone else.
type keyAuth struct{ key string }

func (a *keyAuth) GetClaims(info *authorization.AuthInfo) (*authorization.Claims, error) {
	switch {
	case info.AuthToken == "Bearer "+a.key:
		return &authorization.Claims{Subject: "cloud-user", System: authorization.RoleAdmin}, nil
	case info.TLSSubject != nil && info.TLSSubject.CommonName == "temporal-server":
		return &authorization.Claims{Subject: "system", System: authorization.RoleAdmin}, nil
	}
	return &authorization.Claims{}, nil
}

func (a *keyAuth) Authorize(_ context.Context, caller *authorization.Claims, _ *authorization.CallTarget) (authorization.Result, error) {
	if caller != nil && caller.System == authorization.RoleAdmin {
		return authorization.Result{Decision: authorization.DecisionAllow}, nil
	}
	return authorization.Result{Decision: authorization.DecisionDeny}, nil
}

func TestDialAPIKey(t *testing.T) {
	const key = "tmprl-api-key-0123456789"
	// mTLS lets the server's own system worker in by its certificate; the
	// client's certificate carries no role: the key is what admits it.
	srv, ca := startTLSServer(t, true, &keyAuth{key: key})
	client, err := ca.Issue("evalflow-worker")
	require.NoError(t, err)
	ctx := context.Background()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	conn := Connection{Address: srv.Address(), Namespace: "default", TLSCA: ca.CertFile,
		TLSCert: client.CertFile, TLSKey: client.KeyFile, APIKey: key}

	c, err := DialConnection(ctx, conn, log, 30*time.Second)
	require.NoError(t, err)
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
	require.NoError(t, err, "the key is sent with every call")
	c.Close()

	wrong := conn
	wrong.APIKey = "tmprl-wrong-key-9876543210"
	var texts []string
	if c, err := DialConnection(ctx, wrong, log, 10*time.Second); err == nil {
		_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
		c.Close()
		require.Error(t, err, "a wrong key is refused")
		texts = append(texts, err.Error())
	} else {
		texts = append(texts, err.Error())
	}
	texts = append(texts, logs.String(), conn.String(), conn.Flags())
	for _, text := range texts {
		assert.NotContains(t, text, key)
		assert.NotContains(t, text, wrong.APIKey)
	}
	assert.Contains(t, conn.String(), "API key", "the connection says it uses a key, not which")
}

func TestConnectionFileErrorsNameTheFlag(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		conn Connection
		want string
	}{
		{Connection{Address: "x:7233", TLSCert: filepath.Join(dir, "c.pem")}, "--tls-cert is set without --tls-key"},
		{Connection{Address: "x:7233", TLSKey: filepath.Join(dir, "k.pem")}, "--tls-key is set without --tls-cert"},
		{Connection{Address: "x:7233", TLSCert: filepath.Join(dir, "c.pem"), TLSKey: filepath.Join(dir, "k.pem")}, "--tls-cert"},
		{Connection{Address: "x:7233", TLSCA: filepath.Join(dir, "ca.pem")}, "--tls-ca"},
	} {
		_, err := DialConnection(context.Background(), tc.conn, log, time.Second)
		require.Error(t, err)
		assert.Contains(t, err.Error(), tc.want)
	}
}

func TestCheckNamespaceNamesTheSetupCommand(t *testing.T) {
	srv, ca := startTLSServer(t, false, nil)
	ctx := context.Background()
	conn := Connection{Address: srv.Address(), Namespace: "default", TLSCA: ca.CertFile}
	c, err := DialConnection(ctx, conn, slog.New(slog.DiscardHandler), 30*time.Second)
	require.NoError(t, err)
	defer c.Close()

	err = CheckNamespace(ctx, c, conn)
	require.Error(t, err, "the server was started without evalflow's search attributes")
	assert.Contains(t, err.Error(), "starter setup --address "+srv.Address()+" --tls-ca "+ca.CertFile)

	missing := conn
	missing.Namespace = "nowhere"
	err = CheckNamespace(ctx, c, missing)
	var m *namespace.MissingError
	require.ErrorAs(t, err, &m)
	assert.Contains(t, err.Error(), "--namespace nowhere")
}
