package devserver

import (
	"context"
	"fmt"
	"maps"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// workflowService is the service name the frontend reports health for.
const workflowService = "temporal.api.workflowservice.v1.WorkflowService"

// readyFrontend waits until the frontend is healthy, then registers the
// search attributes the namespace lacks: CreateNamespaces sets them only when
// it creates the namespace, so ones added in a later release need this. The
// services see an added attribute after their next namespace refresh (2 s).
func readyFrontend(ctx context.Context, cfg Config, address string) error {
	conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()))
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
	return addSearchAttributes(ctx, operatorservice.NewOperatorServiceClient(conn), cfg.Namespace, cfg.SearchAttributes)
}

// addSearchAttributes registers the attributes of want missing from
// namespace; one registered with another type is an error.
func addSearchAttributes(ctx context.Context, op operatorservice.OperatorServiceClient, namespace string, want map[string]enumspb.IndexedValueType) error {
	if len(want) == 0 {
		return nil
	}
	have, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		got, ok := have.GetCustomAttributes()[name]
		switch {
		case !ok:
			missing[name] = want[name]
		case got != want[name]:
			return fmt.Errorf("search attribute %s is %s in namespace %q, want %s (remove the data dir to start afresh)",
				name, got, namespace, want[name])
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: missing,
	}); err != nil {
		return fmt.Errorf("add search attributes: %w", err)
	}
	return nil
}
