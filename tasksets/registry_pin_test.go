package tasksets

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveRegistry serves ds as /registry.json on loopback and returns its URL.
func serveRegistry(t *testing.T, ds []Dataset) string {
	t.Helper()
	body, err := json.Marshal(ds)
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/registry.json" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/registry.json"
}

// moveMain points the bare repository's main branch (and HEAD, through
// it) at commit, as a push would.
func moveMain(t *testing.T, url, commit string) {
	t.Helper()
	bare := strings.TrimPrefix(url, "file://")
	for _, args := range [][]string{{"symbolic-ref", "HEAD", "refs/heads/main"}, {"update-ref", "refs/heads/main", commit}} {
		out, err := exec.Command("git", append([]string{"--git-dir", bare}, args...)...).CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
}

// A registry's HEAD and branch entries are pinned when the run starts:
// the lock holds the commit, and opening it after a push still reads the
// tasks at that commit; resolving again finds the new one.
func TestRegistryHeadIsPinnedWhenTheRunStarts(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	url, commits, _ := twoVersions(t)
	moveMain(t, url, commits[0])
	reg := serveRegistry(t, []Dataset{{Name: "demo", Version: "head", Tasks: []RegistryTask{
		{Name: "hello", GitURL: url, GitCommitID: "HEAD", Path: "tasks/hello"},
		{Name: "bye", GitURL: url, GitCommitID: "main", Path: "tasks/bye"},
		{Name: "third", GitURL: url, Path: "tasks/hello"},
	}}})

	l, err := ResolveDataset(context.Background(), reg, "demo@head")
	require.NoError(t, err)
	for _, task := range l.Tasks {
		assert.Equal(t, commits[0], task.GitCommitID, "task %s: HEAD, main and no commit all pin the commit main has now", task.Name)
	}
	ref := l.Ref()

	moveMain(t, url, commits[1]) // a new commit is pushed
	ts, err := Open(ref)
	require.NoError(t, err)
	hello, err := ts.Task(context.Background(), 0)
	require.NoError(t, err)
	assert.Equal(t, "Do tasks/hello.\n", hello.Prompt, "the run reads the recorded commit, not the one pushed since")

	again, err := ResolveDataset(context.Background(), reg, "demo@head")
	require.NoError(t, err)
	assert.Equal(t, commits[1], again.Tasks[0].GitCommitID)
	assert.Contains(t, LockChanges(l, again), "task hello at commit "+commits[1][:12]+", was "+commits[0][:12],
		"a resume resolving anew sees the other commit, and is refused on it")
}

func TestRegistryRefThatIsNoBranchOrTag(t *testing.T) {
	url, commits, _ := twoVersions(t)
	moveMain(t, url, commits[1])
	reg := serveRegistry(t, []Dataset{{Name: "demo", Version: "1", Tasks: []RegistryTask{
		{Name: "hello", GitURL: url, GitCommitID: "abc123", Path: "tasks/hello"},
	}}})
	_, err := ResolveDataset(context.Background(), reg, "demo@1")
	require.ErrorIs(t, err, ErrNoRef)
	assert.Contains(t, err.Error(), `git_commit_id "abc123" is not a full commit id, and `+url+` has no branch or tag of that name`)

	gone := serveRegistry(t, []Dataset{{Name: "demo", Version: "1", Tasks: []RegistryTask{
		{Name: "hello", GitURL: url + ".gone", GitCommitID: "HEAD", Path: "tasks/hello"},
	}}})
	_, err = ResolveDataset(context.Background(), gone, "demo@1")
	var fe *FetchError
	require.ErrorAs(t, err, &fe, "an unreachable repository is the infrastructure's fault")
	assert.Equal(t, url+".gone", fe.URL)
}

// With no registry named, name@version resolves through DefaultRegistry.
func TestRegistryDefaultWhenNoneIsNamed(t *testing.T) {
	_, commits, ds := twoVersions(t)
	old := DefaultRegistry
	DefaultRegistry = serveRegistry(t, ds)
	t.Cleanup(func() { DefaultRegistry = old })

	l, err := ResolveDataset(context.Background(), "", "demo@2.0")
	require.NoError(t, err)
	assert.Equal(t, "demo@2.0", l.String())
	assert.Equal(t, commits[1], l.Tasks[0].GitCommitID)
}

func TestParseDatasetRef(t *testing.T) {
	digest := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		ref  string
		want DatasetRef
	}{
		{"terminal-bench@2.0", DatasetRef{Name: "terminal-bench", Version: "2.0"}},
		{"acme/bench@v1.0", DatasetRef{Org: "acme", Name: "bench", Version: "v1.0"}},
		{"acme/bench@3", DatasetRef{Org: "acme", Name: "bench", Version: "3"}},
		{"acme/bench@sha256:" + digest, DatasetRef{Org: "acme", Name: "bench", Version: "sha256:" + digest}},
	} {
		got, err := ParseDatasetRef(tc.ref)
		require.NoError(t, err, "ParseDatasetRef(%q)", tc.ref)
		assert.Equal(t, tc.want, got, "ParseDatasetRef(%q)", tc.ref)
		assert.Equal(t, tc.ref, got.String())
		assert.True(t, IsDatasetRef(tc.ref), "IsDatasetRef(%q)", tc.ref)
	}
	for _, ref := range []string{"bench", "a/b/c@1", "acme/bench@sha256:abc", "/abs@1", "acme/@1"} {
		_, err := ParseDatasetRef(ref)
		assert.Error(t, err, "ParseDatasetRef(%q)", ref)
	}
}
