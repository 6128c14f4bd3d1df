// Package e2e runs evalflow end to end: an embedded Temporal server, real
// workers, the built-in agent as a subprocess, and a provider over HTTP.
package e2e

import (
	"context"
	"os"
	"testing"

	"github.com/evalflow/evalflow/harness/agent"
	"github.com/evalflow/evalflow/tunnel/tunneltest"
)

// TestMain doubles as the built-in agent: workers started by these tests run
// this test binary with the "agent" argument as their harness.
func TestMain(m *testing.M) {
	tunneltest.ServeFRPSIfAsked() // a child frps for the tunnel tests
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		os.Exit(agent.Main(context.Background(), os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
