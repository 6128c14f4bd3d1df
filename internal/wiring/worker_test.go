package wiring

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpenStore(t *testing.T) {
	dir := t.TempDir()
	store, err := openFiles(filepath.Join(dir, "runs"))
	require.NoError(t, err)
	require.NotNil(t, store)
	entries, err := os.ReadDir(filepath.Join(dir, "runs"))
	require.NoError(t, err)
	assert.Empty(t, entries, "the write check leaves nothing behind")

	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err = NewWorker(nil, Config{RunsDir: filepath.Join(file, "runs")})
	require.Error(t, err)
	assert.Equal(t, 1, strings.Count(err.Error(), "open run store"), "NewWorker error %q says it once", err)
}

func TestOpenStoreReadOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs")
	require.NoError(t, os.Mkdir(dir, 0o755))
	readOnly(t, dir)
	_, err := NewWorker(nil, Config{RunsDir: dir})
	require.Error(t, err, "a read-only run store is refused at start")
	assert.Contains(t, err.Error(), fmt.Sprintf("run store %s is not writable", dir))

	_, err = parseWorker(t, "--runs-dir", dir)
	require.Error(t, err, "the binaries refuse it before they dial Temporal")
	assert.Contains(t, err.Error(), fmt.Sprintf("run store %s is not writable", dir))
}

// readOnly makes dir read-only for this process, root included (there
// through the immutable attribute), until the test ends.
func readOnly(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, os.Chmod(dir, 0o555))
	t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
	if os.Geteuid() != 0 {
		return
	}
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		t.Skipf("root writes to a read-only dir, and chattr +i failed: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", dir).Run() })
}
