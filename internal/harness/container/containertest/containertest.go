// Package containertest gives tests a container runtime on the engine that
// `make engine` serves, with the built-in agent built static for it.
package containertest

import (
	"testing"

	"github.com/evalflow/evalflow/internal/agenttest"
	"github.com/evalflow/evalflow/internal/engine/enginetest"
	"github.com/evalflow/evalflow/internal/harness/container"
)

// Agent is the built-in agent program built static (CGO_ENABLED=0), once
// per test binary, as the container runtime mounts it.
func Agent(t testing.TB) string { return agenttest.Agent(t) }

// Runtime is a container runtime on the test engine, its workspaces in a
// directory of the test's.
func Runtime(t testing.TB) *container.Runtime {
	t.Helper()
	return &container.Runtime{Engine: enginetest.Client(t), Agent: Agent(t), Dir: t.TempDir(), Worker: "test"}
}
