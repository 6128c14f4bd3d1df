// Package faults is evalflow's fault suite: real processes killed with
// SIGKILL, a provider that misbehaves every way one can, a worker under more
// rollouts than it has cores, and malformed input on every route. Each case
// asserts that nothing is lost, duplicated, leaked or scored as the agent's
// failure, and logs its figures as "figure:" lines (make faults prints them;
// RELIABILITY.md records them).
package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/evalflow/evalflow/harness/agent"
	"github.com/evalflow/evalflow/tunnel"
)

// bin holds the binaries the suite runs as real processes: starter, worker
// and evalflow-agent, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	tunnel.ServeFRPClientIfAsked()
	agent.ServeIfAsked()
	dir, err := os.MkdirTemp("", "evalflow-faults-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(2)
	}
	bin = dir
	for name, pkg := range map[string]string{
		"starter": "../starter", "worker": "../worker", "evalflow-agent": "../cmd/evalflow-agent",
	} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "faults: build %s: %v\n%s", pkg, err, out)
			os.RemoveAll(dir)
			os.Exit(2)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
