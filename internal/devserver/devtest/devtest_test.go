package devtest_test

import (
	"context"
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/devserver"
	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/namespace"
)

// A server started for a test answers its client, without a Web UI, and
// is gone once the test has ended.
func TestStartAndDial(t *testing.T) {
	var addr string
	t.Run("server", func(t *testing.T) {
		srv := devtest.Start(t, devserver.Config{})
		assert.Empty(t, srv.UIURL(), "no Web UI unless asked")
		_, err := devtest.Dial(t, srv).CheckHealth(context.Background(), &client.CheckHealthRequest{})
		require.NoError(t, err)
		addr = srv.Address()
	})
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err, "the frontend's port is free once the test ended")
	require.NoError(t, ln.Close())
}

func TestFreeAddr(t *testing.T) {
	for _, addr := range []string{net.JoinHostPort(devserver.DefaultIP, strconv.Itoa(devtest.FreePort(t))), devtest.FreeAddr(t)} {
		ln, err := net.Listen("tcp", addr)
		require.NoError(t, err, "%s is free to bind", addr)
		require.NoError(t, ln.Close())
	}
}

// A server started for evalflow's runs has their search attributes.
func TestStartEvalflow(t *testing.T) {
	_, c := devtest.StartEvalflow(t)
	svc := namespace.Services{Workflow: c.WorkflowService(), Operator: c.OperatorService()}
	require.NoError(t, namespace.Check(context.Background(), svc, namespace.Evalflow(devserver.DefaultNamespace)))
}
