package tasksets

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// taskArchive is a gzipped tar of files, as Harbor's registry stores a
// task version (the task directory's content at its root).
func taskArchive(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, content := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: "./" + name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(content))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	return buf.Bytes()
}

// fakeHub serves, on loopback, what Harbor's client requests of its
// registry for the dataset acme/demo: tag 2.0, revision 3 and its digest
// resolve to one version of two tasks, each an archive in storage.
type fakeHub struct {
	srv      *httptest.Server
	digest   string // the dataset version's
	archives atomic.Int64
}

func newFakeHub(t *testing.T) *fakeHub {
	t.Helper()
	h := &fakeHub{digest: strings.Repeat("d", 64)}
	archives := map[string][]byte{}
	var rows []map[string]any
	for i, name := range []string{"hello", "bye"} {
		files := map[string]string{}
		for k, v := range harborTask(name) {
			files[strings.TrimPrefix(k, name+"/")] = v
		}
		path := "acme/" + name + "/" + strings.Repeat(string(rune('a'+i)), 64) + ".harbor"
		archives["/storage/v1/object/packages/"+path] = taskArchive(t, files)
		rows = append(rows, map[string]any{"task_version": map[string]any{
			"content_hash": strings.Repeat(string(rune('a'+i)), 64), "archive_path": path,
			"package": map[string]any{"name": name, "org": map[string]any{"name": "acme"}},
		}})
	}
	version := map[string]any{"id": "dv-1", "content_hash": h.digest, "revision": 3}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("apikey") == "" || r.Header.Get("Authorization") != "Bearer "+r.Header.Get("apikey") {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		if a, ok := archives[r.URL.Path]; ok {
			h.archives.Add(1)
			w.Write(a)
			return
		}
		q := r.URL.Query()
		var body any = []any{}
		pkg := q.Get("package.name") == "eq.demo" && q.Get("package.org.name") == "eq.acme" && q.Get("package.type") == "eq.dataset"
		switch {
		case r.URL.Path == "/rest/v1/dataset_version_tag" && pkg && q.Get("tag") == "eq.2.0":
			body = []any{map[string]any{"dataset_version": version}}
		case r.URL.Path == "/rest/v1/dataset_version" && pkg && (q.Get("revision") == "eq.3" || q.Get("content_hash") == "eq."+h.digest):
			body = []any{version}
		case r.URL.Path == "/rest/v1/dataset_version_task" && q.Get("dataset_version_id") == "eq.dv-1" && q.Get("offset") == "0":
			body = rows
		case !strings.HasPrefix(r.URL.Path, "/rest/v1/"):
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// org/name@ref resolves through the package registry (the default when
// none is named) by tag, revision or digest alike; its tasks open from
// their archives, once per machine.
func TestHubResolvesAndOpensPackages(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	hub := newFakeHub(t)
	old := DefaultHub
	DefaultHub = hub.srv.URL
	t.Cleanup(func() { DefaultHub = old })

	l, err := ResolveDataset(context.Background(), "", "acme/demo@2.0")
	require.NoError(t, err)
	assert.Equal(t, "acme/demo@2.0", l.String())
	require.Len(t, l.Tasks, 2)
	assert.Equal(t, RegistryTask{Name: "hello", Archive: hub.srv.URL + "/storage/v1/object/packages/acme/hello/" + strings.Repeat("a", 64) + ".harbor",
		Digest: "sha256:" + strings.Repeat("a", 64)}, l.Tasks[0])
	for _, version := range []string{"3", "sha256:" + hub.digest} {
		other, err := ResolveDataset(context.Background(), hub.srv.URL, "acme/demo@"+version)
		require.NoError(t, err, "acme/demo@%s", version)
		assert.Equal(t, l.Tasks, other.Tasks, "acme/demo@%s is the same version", version)
	}

	back, ok, err := ParseLock(l.Ref())
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, l, back)
	ts, err := Open(l.Ref())
	require.NoError(t, err)
	require.EqualValues(t, 2, ts.Len())
	bye, err := ts.Task(context.Background(), 1)
	require.NoError(t, err)
	assert.Equal(t, "bye", bye.ID)
	assert.Equal(t, "Do bye.\n", bye.Prompt)

	hub.srv.Close()
	_, err = Open(l.Ref())
	require.NoError(t, err, "cached archives open without the registry")
	assert.EqualValues(t, 2, hub.archives.Load(), "each archive is downloaded once")
}

func TestHubErrors(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	hub := newFakeHub(t)
	_, err := ResolveDataset(context.Background(), hub.srv.URL, "acme/demo@9.9")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no dataset acme/demo@9.9 in the registry "+hub.srv.URL)
	_, err = ResolveDataset(context.Background(), hub.srv.URL, "demo@2.0")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "names datasets org/name@version")

	l, err := ResolveDataset(context.Background(), hub.srv.URL, "acme/demo@2.0")
	require.NoError(t, err)
	l.Tasks[0].Archive = hub.srv.URL + "/storage/v1/object/packages/acme/missing.harbor"
	_, err = Open(l.Ref())
	require.ErrorIs(t, err, ErrNoArchive, "an archive the storage does not have is the registry's fault")
	hub.srv.Close()
	l.Tasks[0].Digest = "sha256:" + strings.Repeat("e", 64)
	_, err = Open(l.Ref())
	var fe *FetchError
	require.ErrorAs(t, err, &fe, "a registry that cannot be reached is the infrastructure's")
}

func TestUntarRefusesWhatLeavesTheTask(t *testing.T) {
	for _, hdr := range []*tar.Header{
		{Name: "../evil", Typeflag: tar.TypeReg},
		{Name: "/etc/evil", Typeflag: tar.TypeReg},
		{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
	} {
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		tw := tar.NewWriter(gz)
		require.NoError(t, tw.WriteHeader(hdr))
		require.NoError(t, tw.Close())
		require.NoError(t, gz.Close())
		err := untar(&buf, t.TempDir())
		require.Error(t, err, "untar(%s)", hdr.Name)
		assert.Contains(t, err.Error(), hdr.Name)
	}
}
