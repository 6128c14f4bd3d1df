package wiring

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/evalflow/evalflow/internal/namespace"
)

// Names of the flags that say how to reach the Temporal frontend securely.
const (
	FlagTLS           = "tls"
	FlagTLSCert       = "tls-cert"
	FlagTLSKey        = "tls-key"
	FlagTLSCA         = "tls-ca"
	FlagTLSServerName = "tls-server-name"
	FlagAPIKey        = "api-key"
)

// Connection says how to reach a Temporal frontend: where, which namespace,
// and with what credentials. It holds a secret (APIKey): String names the
// kind of connection, never the key, and the struct is never logged or
// marshalled whole.
type Connection struct {
	Address, Namespace string
	// TLS turns on TLS with the system's roots; any field below implies it.
	TLS bool
	// TLSCert and TLSKey are PEM files of the client certificate (mTLS).
	TLSCert, TLSKey string
	// TLSCA is a PEM file of the CA that signed the frontend's certificate,
	// instead of the system's roots.
	TLSCA string
	// TLSServerName is the name the frontend's certificate is checked
	// against, when it is not the address's host.
	TLSServerName string
	// APIKey is sent as a bearer token on every call (Temporal Cloud).
	APIKey string `json:"-"`
}

// ConnectionFromFlags reads the flags of ClientFlags.
func ConnectionFromFlags(cctx *cli.Context) Connection {
	return Connection{
		Address:       cctx.String(FlagAddress),
		Namespace:     cctx.String(FlagNamespace),
		TLS:           cctx.Bool(FlagTLS),
		TLSCert:       cctx.String(FlagTLSCert),
		TLSKey:        cctx.String(FlagTLSKey),
		TLSCA:         cctx.String(FlagTLSCA),
		TLSServerName: cctx.String(FlagTLSServerName),
		APIKey:        cctx.String(FlagAPIKey),
	}
}

// Secure reports whether the connection uses TLS.
func (c Connection) Secure() bool {
	return c.TLS || c.TLSCert != "" || c.TLSKey != "" || c.TLSCA != "" || c.TLSServerName != "" || c.APIKey != ""
}

// String names the address and the kind of connection, without a secret:
// for log lines and errors.
func (c Connection) String() string {
	var how []string
	switch {
	case c.TLSCert != "":
		how = append(how, "mTLS")
	case c.Secure():
		how = append(how, "TLS")
	}
	if c.APIKey != "" {
		how = append(how, "API key")
	}
	if len(how) == 0 {
		return c.Address
	}
	return c.Address + " (" + strings.Join(how, ", ") + ")"
}

// tlsConfig is the client TLS configuration, nil for a plain connection.
// Errors name the flag whose file is wrong.
func (c Connection) tlsConfig() (*tls.Config, error) {
	if !c.Secure() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.TLSServerName}
	switch {
	case c.TLSCert != "" && c.TLSKey == "":
		return nil, fmt.Errorf("--%s is set without --%s: mTLS needs both the client certificate and its key", FlagTLSCert, FlagTLSKey)
	case c.TLSKey != "" && c.TLSCert == "":
		return nil, fmt.Errorf("--%s is set without --%s: mTLS needs both the client certificate and its key", FlagTLSKey, FlagTLSCert)
	case c.TLSCert != "":
		pair, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			// The error of LoadX509KeyPair names files and PEM blocks,
			// never key material.
			return nil, fmt.Errorf("--%s %s / --%s %s: %w", FlagTLSCert, c.TLSCert, FlagTLSKey, c.TLSKey, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if c.TLSCA != "" {
		pem, err := os.ReadFile(c.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", FlagTLSCA, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--%s %s holds no PEM certificate", FlagTLSCA, c.TLSCA)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// options are the SDK client's options for c.
func (c Connection) options(logger *slog.Logger) (client.Options, error) {
	tc, err := c.tlsConfig()
	if err != nil {
		return client.Options{}, err
	}
	opts := client.Options{
		HostPort:          c.Address,
		Namespace:         c.Namespace,
		Logger:            tlog.NewStructuredLogger(logger),
		ConnectionOptions: client.ConnectionOptions{TLS: tc},
	}
	if c.APIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(c.APIKey)
	}
	return opts, nil
}

// Dial connects to the Temporal frontend at address with a plain connection
// and checks it answers within timeout.
func Dial(ctx context.Context, address, namespace string, logger *slog.Logger, timeout time.Duration) (client.Client, error) {
	return DialConnection(ctx, Connection{Address: address, Namespace: namespace}, logger, timeout)
}

// DialConnection connects as conn says and checks the frontend answers
// within timeout. A TLS failure says so: it is not an absent server.
func DialConnection(ctx context.Context, conn Connection, logger *slog.Logger, timeout time.Duration) (client.Client, error) {
	opts, err := conn.options(logger)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("dial temporal at %s: %w", conn, explain(err))
	}
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		c.Close()
		return nil, fmt.Errorf("temporal at %s is not healthy: %w", conn, explain(err))
	}
	return c, nil
}

// explain adds a hint to a connection error whose cause a user would not
// read from gRPC's text.
func explain(err error) error {
	text := err.Error()
	var hint string
	switch {
	case strings.Contains(text, "first record does not look like a TLS handshake"):
		hint = "the frontend does not speak TLS: drop --tls and the --tls-* flags"
	case strings.Contains(text, "certificate required") || strings.Contains(text, "bad certificate"):
		hint = "the frontend asks for a client certificate (mTLS): give --tls-cert and --tls-key"
	case strings.Contains(text, "x509:") || strings.Contains(text, "tls:"):
		hint = "TLS handshake failed: check --tls-ca (the CA that signed the frontend's certificate) and --tls-server-name"
	case strings.Contains(text, "error reading server preface") || strings.Contains(text, "connection reset"):
		hint = "the frontend may expect TLS: try --tls, --tls-ca, or mTLS with --tls-cert/--tls-key"
	default:
		return err
	}
	return fmt.Errorf("%w (%s)", err, hint)
}

// CheckNamespace reports, as an error that names the command that fixes it,
// a namespace that does not exist or lacks evalflow's search attributes:
// runs would fail to start, or start and never be found.
func CheckNamespace(ctx context.Context, c client.Client, conn Connection) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := namespace.Check(ctx, namespace.Services{Workflow: c.WorkflowService(), Operator: c.OperatorService()}, namespace.Evalflow(conn.Namespace))
	var missing *namespace.MissingError
	if errors.As(err, &missing) {
		return fmt.Errorf("%w at %s: run `starter setup %s` once to create it (or have an operator do so)", err, conn, conn.Flags())
	}
	return err
}

// Flags are the command-line flags that make the same connection, for a
// command to print: file paths and names, never the API key (its
// environment variable is named instead).
func (c Connection) Flags() string {
	args := []string{"--" + FlagAddress + " " + c.Address}
	if c.Namespace != "" && c.Namespace != "default" {
		args = append(args, "--"+FlagNamespace+" "+c.Namespace)
	}
	for _, f := range []struct{ name, value string }{
		{FlagTLSCert, c.TLSCert}, {FlagTLSKey, c.TLSKey}, {FlagTLSCA, c.TLSCA}, {FlagTLSServerName, c.TLSServerName},
	} {
		if f.value != "" {
			args = append(args, "--"+f.name+" "+f.value)
		}
	}
	if c.TLS && c.TLSCert == "" && c.TLSCA == "" && c.TLSServerName == "" && c.APIKey == "" {
		args = append(args, "--"+FlagTLS)
	}
	if c.APIKey != "" {
		args = append(args, "(with TEMPORAL_API_KEY set)")
	}
	return strings.Join(args, " ")
}
