// Package agenttest builds the built-in agent program for tests, static
// (CGO_ENABLED=0) as the sandboxes mount it, once per test binary.
package agenttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	once sync.Once
	path string
	err  error
)

// Agent is the path of the built-in agent program, built static.
func Agent(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		dir, mkErr := os.MkdirTemp("", "evalflow-sandbox-agent-")
		if mkErr != nil {
			err = mkErr
			return
		}
		path = filepath.Join(dir, "evalflow-agent")
		cmd := exec.Command("go", "build", "-o", path, "github.com/evalflow/evalflow/cmd/evalflow-agent")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, buildErr := cmd.CombinedOutput(); buildErr != nil {
			err = buildErr
			path = string(out)
		}
	})
	require.NoError(t, err, "build the static agent: %s", path)
	return path
}
