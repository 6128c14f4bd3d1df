// Package containertest gives tests a container runtime on the engine that
// `make engine` serves, with the built-in agent built static for it.
package containertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/engine/enginetest"
	"github.com/evalflow/evalflow/internal/harness/container"
)

var (
	agentOnce sync.Once
	agentPath string
	agentErr  error
)

// Agent is the built-in agent program built static (CGO_ENABLED=0), once
// per test binary, as the container runtime mounts it.
func Agent(t testing.TB) string {
	t.Helper()
	agentOnce.Do(func() {
		dir, err := os.MkdirTemp("", "evalflow-sandbox-agent-")
		if err != nil {
			agentErr = err
			return
		}
		agentPath = filepath.Join(dir, "evalflow-agent")
		cmd := exec.Command("go", "build", "-o", agentPath, "github.com/evalflow/evalflow/cmd/evalflow-agent")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			agentErr = err
			agentPath = string(out)
		}
	})
	require.NoError(t, agentErr, "build the static agent: %s", agentPath)
	return agentPath
}

// Runtime is a container runtime on the test engine, its workspaces in a
// directory of the test's.
func Runtime(t testing.TB) *container.Runtime {
	t.Helper()
	return &container.Runtime{Engine: enginetest.Client(t), Agent: Agent(t), Dir: t.TempDir(), Worker: "test"}
}
