package tasksets

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/gittest"
)

// bareRepo makes a bare repository with a commit per tree (files under
// their paths); it returns the repository's file:// URL and the commits
// in order.
func bareRepo(t *testing.T, trees ...map[string]string) (string, []string) {
	t.Helper()
	steps := make([]func(string), len(trees))
	for i, tree := range trees {
		steps[i] = func(work string) { writeTree(t, work, tree) }
	}
	return gittest.Repo(t, steps...)
}

// writeRegistry writes datasets as a registry file and returns its path.
func writeRegistry(t *testing.T, ds []Dataset) string {
	t.Helper()
	b, err := json.Marshal(ds)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "registry.json")
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

// twoVersions is a repository whose first commit holds tasks/hello and
// tasks/bye, and whose second changes hello's instruction; and a registry
// naming demo@1.0 and demo@2.0 at those commits.
func twoVersions(t *testing.T) (url string, commits []string, ds []Dataset) {
	t.Helper()
	v1 := map[string]string{"README.md": "tasks\n"}
	for name, c := range harborTask("tasks/hello") {
		v1[name] = c
	}
	for name, c := range harborTask("tasks/bye") {
		v1[name] = c
	}
	v2 := map[string]string{}
	for name, c := range v1 {
		v2[name] = c
	}
	v2["tasks/hello/instruction.md"] = "Say hello, version two.\n"
	url, commits = bareRepo(t, v1, v2)
	version := func(v, commit string) Dataset {
		return Dataset{Name: "demo", Version: v, Description: "two tasks", Tasks: []RegistryTask{
			{Name: "hello", GitURL: url, GitCommitID: commit, Path: "tasks/hello"},
			{Name: "bye", GitURL: url, GitCommitID: commit, Path: "tasks/bye"},
		}}
	}
	return url, commits, []Dataset{version("1.0", commits[0]), version("2.0", commits[1])}
}

func TestRegistryResolvesAndOpensTasksAtTheirCommit(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	_, commits, ds := twoVersions(t)
	reg := writeRegistry(t, ds)
	read, err := ReadRegistry(context.Background(), reg)
	require.NoError(t, err)
	require.Equal(t, ds, read)

	for _, tc := range []struct {
		version, commit, hello string
	}{
		{"1.0", commits[0], "Do tasks/hello.\n"},
		{"2.0", commits[1], "Say hello, version two.\n"},
	} {
		l, err := Resolve(read, "demo@"+tc.version)
		require.NoError(t, err)
		ref := l.Ref()
		assert.Equal(t, "demo@"+tc.version, DisplayName(ref))
		back, ok, err := ParseLock(ref)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, l, back, "the reference carries every task's repository, commit and path")

		ts, err := Open(ref)
		require.NoError(t, err)
		require.EqualValues(t, 2, ts.Len())
		hello, err := ts.Task(context.Background(), 0)
		require.NoError(t, err)
		assert.Equal(t, "hello", hello.ID, "tasks keep the registry's order and names")
		assert.Equal(t, tc.hello, hello.Prompt, "demo@%s is read at commit %s", tc.version, tc.commit)
		assert.Equal(t, HarborVerify, hello.Verify)
		assert.FileExists(t, filepath.Join(hello.Tests, HarborTestScript))
		bye, err := ts.Task(context.Background(), 1)
		require.NoError(t, err)
		assert.Equal(t, "bye", bye.ID)
	}
}

func TestRegistryCacheHitNeedsNoRepository(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	url, _, ds := twoVersions(t)
	l, err := Resolve(ds, "demo@1.0")
	require.NoError(t, err)
	first, err := Open(l.Ref())
	require.NoError(t, err)
	want, err := first.Task(context.Background(), 0)
	require.NoError(t, err)

	// The repository goes away: a second open must not fetch again.
	bare := strings.TrimPrefix(url, "file://")
	require.NoError(t, os.Rename(bare, bare+".gone"))
	second, err := Open(l.Ref())
	require.NoError(t, err, "a cached commit opens without its repository")
	got, err := second.Task(context.Background(), 0)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// A commit not cached yet does fetch, and fails naming the URL.
	l2, err := Resolve(ds, "demo@2.0")
	require.NoError(t, err)
	_, err = Open(l2.Ref())
	var fe *FetchError
	require.ErrorAs(t, err, &fe, "an unreachable repository is an infrastructure error")
	assert.Equal(t, url, fe.URL)
	assert.Contains(t, err.Error(), url)
	assert.Contains(t, err.Error(), "does not appear to be a git repository", "git's own message is kept")
}

func TestRegistryConcurrentFetchesOfOneCommit(t *testing.T) {
	url, commits, _ := twoVersions(t)
	cache := &GitCache{Dir: t.TempDir()}
	const n = 6
	dirs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dirs[i], errs[i] = cache.Checkout(context.Background(), url, commits[0])
		}()
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, dirs[0], dirs[i], "one directory per repository and commit")
	}
	assert.FileExists(t, filepath.Join(dirs[0], "tasks", "hello", "instruction.md"))
	entries, err := os.ReadDir(cache.Dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no half-written copies are left behind")
}

func TestRegistryBadInput(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	url, _, ds := twoVersions(t)
	ds = append(ds, Dataset{Name: "other", Version: "0.1", Tasks: ds[0].Tasks})

	_, err := Resolve(ds, "demo@3.0")
	require.Error(t, err)
	assert.Equal(t, "dataset demo has no version 3.0 in the registry; its versions: 1.0, 2.0", err.Error())
	_, err = Resolve(ds, "nope@1.0")
	require.Error(t, err)
	assert.Equal(t, "no dataset nope in the registry; it has: demo, other", err.Error())

	missing := "0123456789abcdef0123456789abcdef01234567"
	l := Lock{Name: "demo", Version: "9", Tasks: []RegistryTask{{Name: "hello", GitURL: url, GitCommitID: missing, Path: "tasks/hello"}}}
	_, err = Open(l.Ref())
	require.ErrorIs(t, err, ErrNoCommit)
	assert.Contains(t, err.Error(), missing)
	assert.Contains(t, err.Error(), url)
	var fe *FetchError
	assert.False(t, errors.As(err, &fe), "a commit the repository lacks is the registry's fault, not the infrastructure's")

	l.Tasks[0].GitCommitID = ds[0].Tasks[0].GitCommitID
	l.Tasks[0].Path = "tasks/absent"
	_, err = Open(l.Ref())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "hello: no directory tasks/absent at commit")

	bad := writeRegistry(t, []Dataset{{Name: "x", Version: "1", Tasks: []RegistryTask{
		{Name: "a", GitURL: url, GitCommitID: "abc..123", Path: "tasks/a"},
		{Name: "b", GitURL: "", GitCommitID: missing, Path: "../b"},
		{Name: "c", GitURL: "https://ghp_s3cr3t@example.com/r.git", GitCommitID: missing, Path: "c"},
	}}})
	_, err = ReadRegistry(context.Background(), bad)
	require.Error(t, err)
	for _, want := range []string{`task 0 (a): git_commit_id must be a full commit id, HEAD, a branch or a tag, got "abc..123"`, "task 1 (b): git_url is required", `path "../b" must be relative`,
		"task 2 (c): git_url must not hold a user or token"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.NotContains(t, err.Error(), "ghp_s3cr3t", "a registry's error never repeats a credential")

	_, err = Open("demo@1.0")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the starter resolves it (through --registry FILE|URL, "+RegistryEnv)
}

func TestRegistryOverHTTP(t *testing.T) {
	_, _, ds := twoVersions(t)
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
	defer srv.Close()
	got, err := ReadRegistry(context.Background(), srv.URL+"/registry.json")
	require.NoError(t, err)
	assert.Equal(t, ds, got)
	_, err = ReadRegistry(context.Background(), srv.URL+"/missing.json")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "404")
}

func TestLockChangesNameTheTasks(t *testing.T) {
	_, commits, ds := twoVersions(t)
	was, err := Resolve(ds, "demo@1.0")
	require.NoError(t, err)
	assert.Empty(t, LockChanges(was, was))
	now := Lock{Name: was.Name, Version: was.Version, Tasks: []RegistryTask{was.Tasks[0], was.Tasks[1]}}
	now.Tasks[0].GitCommitID = commits[1]
	now.Tasks = append(now.Tasks[:1], RegistryTask{Name: "new", GitURL: was.Tasks[1].GitURL, GitCommitID: commits[1], Path: "tasks/bye"})
	assert.Equal(t, []string{
		"task hello at commit " + commits[1][:12] + ", was " + commits[0][:12],
		"task new added (" + commits[1][:12] + ")",
		"task bye removed",
	}, LockChanges(was, now))
}

func TestRedactURLDropsCredentials(t *testing.T) {
	assert.Equal(t, "https://host/repo.git", redactURL("https://tok3n@host/repo.git"))
	assert.Equal(t, "fatal: unable to access 'https://host/r.git/': 403", redactURLs("fatal: unable to access 'https://user:pw@host/r.git/': 403"))
}

func TestRegistryCommitNoBranchPointsAtOverProtocolV0(t *testing.T) {
	url, commits, _ := twoVersions(t)
	// Protocol v0 refuses a commit no ref points at; the first commit is
	// behind main.
	t.Setenv("GIT_CONFIG_COUNT", "1")
	t.Setenv("GIT_CONFIG_KEY_0", "protocol.version")
	t.Setenv("GIT_CONFIG_VALUE_0", "0")
	cache := &GitCache{Dir: t.TempDir()}
	dir, err := cache.Checkout(context.Background(), url, commits[0])
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, "tasks", "hello", "instruction.md"))
	require.NoError(t, err)
	assert.Equal(t, "Do tasks/hello.\n", string(b), "the first commit's tree")

	_, err = cache.Checkout(context.Background(), url, "0123456789abcdef0123456789abcdef01234567")
	require.ErrorIs(t, err, ErrNoCommit)
}
