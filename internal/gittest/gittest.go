// Package gittest makes git repositories for tests: a bare repository of
// a test's own at a file:// URL, as a registry's tasks name theirs.
package gittest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Repo is a bare repository whose main branch holds a commit per step:
// each step writes into the work tree (the directory it is given) what
// its commit holds, the files of the commit before removed. It returns
// the repository's file:// URL and the commits in order.
func Repo(tb testing.TB, steps ...func(work string)) (url string, commits []string) {
	tb.Helper()
	root := tb.TempDir()
	bare := filepath.Join(root, "tasks.git")
	git(tb, root, "init", "-q", "--bare", bare)
	work := filepath.Join(root, "work")
	git(tb, root, "init", "-q", work)
	for i, step := range steps {
		if i > 0 {
			git(tb, work, "rm", "-rq", ".")
		}
		step(work)
		git(tb, work, "add", "-A")
		git(tb, work, "commit", "-qm", "tasks")
		commits = append(commits, git(tb, work, "rev-parse", "HEAD"))
		git(tb, work, "push", "-q", bare, "HEAD:refs/heads/main")
	}
	return "file://" + bare, commits
}

// git runs git in dir as an author of the test's, failing the test on an
// error, and returns its output.
func git(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	require.NoError(tb, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}
