// Package e2e runs evalflow end to end: an embedded Temporal server, real
// workers, the built-in agent as a subprocess, and a provider over HTTP.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/evalflow/evalflow/internal/harness/agent"
	"github.com/evalflow/evalflow/tunnel"
	"github.com/evalflow/evalflow/tunnel/tunneltest"
)

// agentCommand is the built-in agent the tests' workers run as harness: the
// small cmd/evalflow-agent binary, built once, or else this test binary,
// which doubles as the agent when called with "agent".
var agentCommand = []string{os.Args[0], agent.Subcommand}

func TestMain(m *testing.M) {
	tunnel.ServeFRPClientIfAsked() // the workers' frp client processes
	tunneltest.ServeFRPSIfAsked()  // a child frps for the tunnel tests
	agent.ServeIfAsked()
	dir, err := os.MkdirTemp("", "evalflow-e2e-agent-")
	if err == nil {
		bin := filepath.Join(dir, "evalflow-agent")
		// Not under -race: the agent is not the code under test here, and a
		// lean binary starts fast when a hundred rollouts run at once.
		// Static, as the container runtime mounts it into sandboxes.
		build := exec.Command("go", "build", "-o", bin, "../cmd/evalflow-agent")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := build.CombinedOutput()
		if err == nil {
			agentCommand = []string{bin}
		} else {
			fmt.Fprintf(os.Stderr, "e2e: building the agent failed, using the test binary: %v\n%s", err, out)
		}
	}
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}
