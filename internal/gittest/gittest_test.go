package gittest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/gittest"
)

// Each commit holds what its step wrote, and nothing of the one before.
func TestRepoCommitsEachStep(t *testing.T) {
	write := func(name string) func(string) {
		return func(work string) {
			require.NoError(t, os.WriteFile(filepath.Join(work, name), []byte(name+"\n"), 0o644))
		}
	}
	url, commits := gittest.Repo(t, write("a.txt"), write("b.txt"))
	require.Len(t, commits, 2)
	assert.True(t, strings.HasPrefix(url, "file://"), "url %s", url)
	for i, want := range []string{"a.txt", "b.txt"} {
		out, err := exec.Command("git", "--git-dir", strings.TrimPrefix(url, "file://"), "ls-tree", "--name-only", commits[i]).Output()
		require.NoError(t, err)
		assert.Equal(t, want, strings.TrimSpace(string(out)), "commit %d", i)
	}
	out, err := exec.Command("git", "--git-dir", strings.TrimPrefix(url, "file://"), "rev-parse", "main").Output()
	require.NoError(t, err)
	assert.Equal(t, commits[1], strings.TrimSpace(string(out)), "main is the last commit")
}
