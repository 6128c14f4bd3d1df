// Package faults is evalflow's fault suite: real processes killed with
// SIGKILL, a provider that misbehaves every way one can, a worker under more
// rollouts than it has cores, and malformed input on every route. Each case
// asserts that nothing is lost, duplicated, leaked or scored as the agent's
// failure, and logs its figures as "figure:" lines (make faults prints them;
// RELIABILITY.md records them).
//
// The cases that time nothing the machine's load changes and look at
// nothing of the host but their own (the provider's faults, malformed
// input, the clusters, the container sandboxes, the PostgreSQL store) run
// side by side once the others are done; those that count the host's agent
// processes, time a stop, load both cores or restart the shared PostgreSQL
// run alone, first.
package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/evalflow/evalflow/internal/harness/agent"
	"github.com/evalflow/evalflow/tunnel"
)

// bin holds the binaries the suite runs as real processes: starter, worker
// and evalflow-agent, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// run is TestMain's body, so that its deferred removals run before the exit.
func run(m *testing.M) int {
	tunnel.ServeFRPClientIfAsked()
	agent.ServeIfAsked()
	stormIfAsked()
	var dirs [3]string
	for i, pattern := range []string{"evalflow-faults-bin-", "evalflow-faults-", "evalflow-faults-secrets-"} {
		dir, err := os.MkdirTemp("", pattern)
		if err != nil {
			fmt.Fprintln(os.Stderr, "faults:", err)
			return 2
		}
		dirs[i] = dir
	}
	bin, suiteRoot, secretsDir = dirs[0], dirs[1], dirs[2]
	defer func() {
		for _, dir := range dirs {
			os.RemoveAll(dir)
		}
	}()
	for name, pkg := range map[string]string{
		"starter": "../starter", "worker": "../worker", "evalflow-agent": "../cmd/evalflow-agent",
	} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, name), pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "faults: build %s: %v\n%s", pkg, err, out)
			return 2
		}
	}
	code := m.Run()
	// Last, when every case has written all it will: no secret anywhere.
	msg, ok := scanSuite()
	fmt.Println(msg)
	if !ok {
		code = 1
	}
	return code
}

// figure logs one of the suite's figures.
func figure(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("figure: "+format, args...)
}

func itoa(i int) string { return strconv.Itoa(i) }
