package devserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"go.temporal.io/api/operatorservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/evalflow/evalflow/internal/namespace"
)

// workflowService is the service name the frontend reports health for.
const workflowService = "temporal.api.workflowservice.v1.WorkflowService"

// readyFrontend waits until the frontend is healthy, then registers the
// search attributes the namespace lacks: CreateNamespaces sets them only when
// it creates the namespace, so ones added in a later release need this. The
// services see an added attribute after their next namespace refresh (2 s).
func readyFrontend(ctx context.Context, cfg Config, address string) error {
	creds, err := transportCredentials(cfg.TLS)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(creds))
	if err != nil {
		return fmt.Errorf("dial frontend %s: %w", address, err)
	}
	defer func() { _ = conn.Close() }()

	health := healthpb.NewHealthClient(conn)
	err = poll(ctx, func(ctx context.Context) error {
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: workflowService})
		if err != nil {
			return err
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("frontend is %s", resp.GetStatus())
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("wait for frontend %s: %w", address, err)
	}
	return namespace.AddAttributes(ctx, operatorservice.NewOperatorServiceClient(conn), namespace.Want{Namespace: cfg.Namespace, Attributes: cfg.SearchAttributes})
}

// transportCredentials are the credentials the server's readiness check
// dials its frontend with: plain, or TLS with the server's own certificate.
func transportCredentials(t *TLS) (credentials.TransportCredentials, error) {
	if t == nil {
		return insecure.NewCredentials(), nil
	}
	pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("frontend TLS certificate: %w", err)
	}
	ca, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, fmt.Errorf("frontend TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("frontend TLS CA %s holds no PEM certificate", t.CAFile)
	}
	return credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}, RootCAs: pool, ServerName: t.ServerName,
	}), nil
}
