package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/server/common/authorization"

	"github.com/evalflow/evalflow/internal/devserver"
	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/namespace"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/workflows"
)

// startBareServer starts an embedded server with only its "default"
// namespace and no evalflow search attributes: a fresh cluster, as far as
// evalflow can tell.
func startBareServer(t *testing.T, authorizer authorization.Authorizer) *devserver.Server {
	t.Helper()
	return devtest.Start(t, devserver.Config{Authorizer: authorizer})
}

// runStarter runs the starter's command line and returns what it wrote.
func runStarter(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	app := newApp()
	var out, errOut bytes.Buffer
	app.Writer, app.ErrWriter = &out, &errOut
	err = app.RunContext(context.Background(), append([]string{"starter"}, args...))
	return out.String(), errOut.String(), err
}

func TestSetupMakesTheNamespaceReadyOnce(t *testing.T) {
	srv := startBareServer(t, nil)
	addr := srv.Address()

	_, _, err := runStarter(t, "eval", "--address", addr, "--namespace", "evals", "--tasks", "1", "--data-dir", t.TempDir(), "--runs-dir", t.TempDir())
	require.Error(t, err, "a run refuses a namespace that does not exist")
	assert.Contains(t, err.Error(), "starter setup --address "+addr+" --namespace evals")

	out, _, err := runStarter(t, "setup", "--address", addr, "--namespace", "evals", "--retention", "24h")
	require.NoError(t, err)
	assert.Contains(t, out, `done  namespace "evals" created (retention 24h0m0s)`)
	assert.Contains(t, out, "done  search attributes EvalflowHarness, EvalflowModel, EvalflowRunId, EvalflowTaskset added")

	c, err := wiring.Dial(context.Background(), addr, "evals", slog.New(slog.DiscardHandler), 10*time.Second)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, namespace.Check(context.Background(), namespace.Services{Workflow: c.WorkflowService(), Operator: c.OperatorService()}, namespace.Evalflow("evals")))

	out, _, err = runStarter(t, "setup", "--address", addr, "--namespace", "evals")
	require.NoError(t, err, "setup is safe to repeat")
	assert.NotContains(t, out, "done")
	assert.Contains(t, out, `ok    namespace "evals" exists`)

	// The namespace the server made at start lacks the attributes only.
	out, _, err = runStarter(t, "setup", "--address", addr)
	require.NoError(t, err)
	assert.Contains(t, out, `ok    namespace "default" exists`)
	assert.Contains(t, out, "done  search attributes EvalflowHarness, EvalflowModel, EvalflowRunId, EvalflowTaskset added")
}

// A namespace set up before EvalflowHarness existed still runs everything:
// the check passes, and setup adds that attribute alone.
func TestOlderNamespaceLacksOnlyTheHarnessAttribute(t *testing.T) {
	srv := startBareServer(t, nil)
	addr := srv.Address()
	ctx := context.Background()
	c, err := wiring.Dial(ctx, addr, "default", slog.New(slog.DiscardHandler), 10*time.Second)
	require.NoError(t, err)
	defer c.Close()
	svc := namespace.Services{Workflow: c.WorkflowService(), Operator: c.OperatorService()}
	old := namespace.Evalflow("older")
	delete(old.Attributes, workflows.AttrHarness)
	_, err = namespace.Ensure(ctx, svc, old)
	require.NoError(t, err)

	require.NoError(t, namespace.Check(ctx, svc, namespace.Evalflow("older")), "an older namespace is no missing one")
	out, _, err := runStarter(t, "setup", "--address", addr, "--namespace", "older")
	require.NoError(t, err)
	assert.Contains(t, out, "done  search attributes "+workflows.AttrHarness+" added")
}

// operatorDenied refuses what only an operator may do: create namespaces
// and search attributes.
type operatorDenied struct{}

func (operatorDenied) Authorize(_ context.Context, _ *authorization.Claims, target *authorization.CallTarget) (authorization.Result, error) {
	if strings.HasSuffix(target.APIName, "/RegisterNamespace") || strings.HasSuffix(target.APIName, "/AddSearchAttributes") {
		return authorization.Result{Decision: authorization.DecisionDeny}, nil
	}
	return authorization.Result{Decision: authorization.DecisionAllow}, nil
}

func TestSetupPrintsWhatToRunWhenRefused(t *testing.T) {
	srv := startBareServer(t, operatorDenied{})
	_, errOut, err := runStarter(t, "setup", "--address", srv.Address(), "--namespace", "evals")
	require.Error(t, err)
	assert.Equal(t, exitCode(2), err)
	for _, want := range []string{
		"temporal operator namespace create --namespace evals --retention 72h0m0s",
		"temporal operator search-attribute create --namespace evals --name EvalflowModel --type Keyword",
		"temporal operator search-attribute create --namespace evals --name EvalflowRunId --type Keyword",
		"temporal operator search-attribute create --namespace evals --name EvalflowTaskset --type Keyword",
	} {
		assert.Contains(t, errOut, want)
	}

	_, errOut, err = runStarter(t, "setup", "--address", srv.Address())
	require.Error(t, err, "the namespace exists; its attributes cannot be added")
	assert.NotContains(t, errOut, "namespace create")
	assert.Contains(t, errOut, "temporal operator search-attribute create --namespace default --name EvalflowRunId --type Keyword")
}

func TestAnAddressGivenMustAnswer(t *testing.T) {
	dataDir := t.TempDir()
	addr := devtest.FreeAddr(t)
	_, _, err := runStarter(t, "eval", "--address", addr, "--tasks", "1", "--data-dir", dataDir, "--runs-dir", t.TempDir(), "--ui-port", "-1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no Temporal server answers at "+addr)
	assert.Contains(t, err.Error(), "--embedded")
	_, statErr := os.Stat(filepath.Join(dataDir, "temporal.db"))
	assert.True(t, os.IsNotExist(statErr), "no embedded server was started at the cluster's address")

	t.Setenv("TEMPORAL_ADDRESS", addr)
	_, _, err = runStarter(t, "eval", "--tasks", "1", "--data-dir", dataDir, "--runs-dir", t.TempDir(), "--ui-port", "-1")
	require.Error(t, err, "an address in the environment is given too")
	assert.Contains(t, err.Error(), "no Temporal server answers at "+addr)

	_, _, err = runStarter(t, "eval", "--tasks", "1", "--embedded", "--data-dir", dataDir, "--runs-dir", t.TempDir(), "--ui-port", "-1",
		"--tls-ca", filepath.Join(dataDir, "ca.pem"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the embedded server speaks plain gRPC", "TLS flags with --embedded are refused")
}
