package results

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunsListsRunDirectories(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	_, _, err = s.Put(ctx, record("eval-b", 0, 0), nil)
	require.NoError(t, err)
	require.NoError(t, s.WriteSummary(ctx, "eval-a", map[string]int{"rollouts": 0}))
	require.NoError(t, s.WriteEpoch(ctx, "train-c", 0, map[string]int{"epoch": 0}))
	require.NoError(t, os.MkdirAll(filepath.Join(s.root, "empty"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(s.root, "notes.txt"), []byte("x"), 0o644))

	ids, err := s.Runs(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"eval-a", "eval-b", "train-c"}, ids)
}
