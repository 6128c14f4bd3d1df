package temporalcluster

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/internal/namespace"
	"github.com/evalflow/evalflow/internal/results/postgres/pgtest"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/workflows"
)

// The cluster comes up as four processes with mTLS at the frontend, takes
// evalflow's namespace, and comes back after every process was killed.
func TestClusterStartsKillsAndRestarts(t *testing.T) {
	c := StartSecure(t, Options{Shards: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	plain := wiring.Connection{Address: c.Address, Namespace: "default"}
	_, err := wiring.DialConnection(ctx, plain, slog.New(slog.DiscardHandler), 3*time.Second)
	require.Error(t, err, "the frontend speaks TLS only")

	cl := c.Dial(t, "evals")
	svc := namespace.Services{Workflow: cl.WorkflowService(), Operator: cl.OperatorService()}
	_, err = namespace.Ensure(ctx, svc, namespace.Evalflow("evals"))
	require.NoError(t, err)
	// Once setup returns, a run started with the attributes is taken:
	// the frontend's namespace cache knows them.
	attrs := temporal.NewSearchAttributes(
		temporal.NewSearchAttributeKeyKeyword(workflows.AttrRunID).ValueSet("probe"),
		temporal.NewSearchAttributeKeyKeyword(workflows.AttrHarness).ValueSet("agent"))
	_, err = cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "probe", TaskQueue: "no-worker", TypedSearchAttributes: attrs}, workflows.EvalName)
	require.NoError(t, err, "a run started right after setup carries its search attributes")
	require.NoError(t, cl.TerminateWorkflow(ctx, "probe", "", "probe"))

	c.Kill()
	require.NoError(t, c.Restart(ctx))
	cl = c.Dial(t, "evals")
	require.NoError(t, namespace.Check(ctx, namespace.Services{Workflow: cl.WorkflowService(), Operator: cl.OperatorService()}, namespace.Evalflow("evals")),
		"the namespace outlives the processes: it is in PostgreSQL")

	c.Stop()
	pg, err := pgx.Connect(ctx, pgtest.ServerURL())
	require.NoError(t, err)
	defer pg.Close(ctx)
	var left int
	require.NoError(t, pg.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = ANY($1)", c.databases).Scan(&left))
	require.Len(t, c.databases, 2)
	require.Zero(t, left, "Stop drops the cluster's databases")
}

// A service process that ends on its own is an error naming the service
// and carrying the end of its log: the test's temp dir holding the log is
// gone by the time CI's output is read.
func TestAnExitedServiceReportsItsLog(t *testing.T) {
	dir := t.TempDir()
	server := filepath.Join(dir, "temporal-server")
	require.NoError(t, os.WriteFile(server, []byte("#!/bin/sh\necho \"starting $6\"\necho 'unable to bind the membership port' >&2\nexit 1\n"), 0o755))
	c := &Cluster{Address: "127.0.0.1:1", opts: Options{Dir: dir}, server: server,
		procs: map[string]*exec.Cmd{}, done: map[string]chan struct{}{}}
	require.NoError(t, c.StartService("matching"))
	t.Cleanup(func() { c.Kill() })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := c.WaitReady(ctx)
	require.ErrorIs(t, err, errExited)
	require.ErrorContains(t, err, "matching")
	require.ErrorContains(t, err, "starting matching")
	require.ErrorContains(t, err, "unable to bind the membership port")
}
