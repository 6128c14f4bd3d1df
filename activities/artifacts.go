package activities

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/trace"
)

// What an attempt's trace keeps of /logs/artifacts: the content of
// maxArtifactFiles files, maxArtifactBytes in all; past those a file is
// listed by path and size only, and past maxArtifactsListed it is counted.
const (
	maxArtifactFiles   = 256
	maxArtifactBytes   = 8 << 20
	maxArtifactsListed = 4096
)

// Why an artifact's content is not in the trace (trace.Artifact.Omitted).
const (
	omittedFiles   = "past the 256 files an attempt keeps"
	omittedBytes   = "past the 8 MiB an attempt keeps"
	omittedSpecial = "not a regular file"
)

// artifactDir is where an attempt's artifacts are read from when its trace
// is made (after the agent, and again after the verifier), and the
// rollout's secret, taken out of them as out of the harness's output.
type artifactDir struct {
	ws     *harness.Workspace
	secret string
}

// fill sets tr's artifacts to what the workspace's /logs/artifacts holds
// now. A directory that cannot be read leaves them empty: the artifacts
// are a record of the attempt, never a reason to fail it.
func (d artifactDir) fill(tr *trace.Rollout) {
	if d.ws == nil || d.ws.Logs == "" {
		return
	}
	root, err := os.OpenRoot(filepath.Join(d.ws.Logs, harness.ArtifactLogs))
	if err != nil {
		return
	}
	defer root.Close()
	c := collector{root: root, secret: d.secret, bytesLeft: maxArtifactBytes}
	// Walking never follows a link: a linked directory is an entry, and
	// the root refuses any path out of it.
	_ = fs.WalkDir(root.FS(), ".", c.visit)
	tr.Artifacts, tr.ArtifactsUnlisted = c.list, c.unlisted
}

// collector gathers artifacts within the attempt's limits.
type collector struct {
	root      *os.Root
	secret    string
	list      []trace.Artifact
	unlisted  int
	kept      int
	bytesLeft int64
}

// visit is fs.WalkDir's callback: each file, link or special file under
// the root is listed, and a regular file's content kept while the limits
// allow.
func (c *collector) visit(p string, e fs.DirEntry, err error) error {
	if err != nil || e.IsDir() {
		return nil // an unreadable directory is skipped, the rest walked
	}
	if len(c.list) >= maxArtifactsListed {
		c.unlisted++
		return nil
	}
	a := trace.Artifact{Path: p}
	if info, err := e.Info(); err == nil {
		a.Size = info.Size()
	}
	switch {
	case !e.Type().IsRegular():
		a.Size, a.Omitted = 0, omittedSpecial
	case c.kept >= maxArtifactFiles:
		a.Omitted = omittedFiles
	case a.Size > c.bytesLeft:
		a.Omitted = omittedBytes
	default:
		c.read(&a)
	}
	c.list = append(c.list, a)
	return nil
}

// read fills a's content from its file, opened without following a link
// or waiting on a pipe that replaced it since the walk saw it.
func (c *collector) read(a *trace.Artifact) {
	f, err := c.root.OpenFile(a.Path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		a.Omitted = unreadable(err)
		return
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		a.Omitted = omittedSpecial
		return
	}
	// The file may have grown since: one byte past the budget says so.
	b, err := io.ReadAll(io.LimitReader(f, c.bytesLeft+1))
	switch {
	case err != nil:
		a.Omitted = unreadable(err)
		return
	case int64(len(b)) > c.bytesLeft:
		a.Omitted = omittedBytes
		return
	}
	c.kept++
	c.bytesLeft -= int64(len(b))
	a.Size = int64(len(b))
	a.MediaType = mediaType(a.Path, b)
	if c.secret != "" {
		b = bytes.ReplaceAll(b, []byte(c.secret), []byte(secretBlank))
	}
	if textual(a.MediaType) && utf8.Valid(b) && !bytes.ContainsRune(b, 0) {
		a.Encoding, a.Content = trace.ArtifactText, string(b)
		return
	}
	a.Encoding, a.Content = trace.ArtifactBase64, base64.StdEncoding.EncodeToString(b)
}

// unreadable says why a file could not be read, without its host path.
func unreadable(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return "unreadable: " + err.Error()
}

// secretBlank stands for the rollout's secret in what is kept of an
// artifact, as in the harness's output (redacted).
const secretBlank = "[rollout secret]"

// byExtension names the type of text whose content alone says only
// "text/plain".
var byExtension = map[string]string{
	".json": "application/json", ".jsonl": "application/x-ndjson", ".ndjson": "application/x-ndjson",
	".md": "text/markdown", ".csv": "text/csv", ".tsv": "text/tab-separated-values",
	".yaml": "application/yaml", ".yml": "application/yaml", ".svg": "image/svg+xml",
	".xml": "application/xml", ".html": "text/html", ".htm": "text/html",
}

// mediaType is a file's type by its content (http.DetectContentType),
// refined by its extension where the content says only that it is text.
func mediaType(name string, content []byte) string {
	sniffed := http.DetectContentType(content)
	if strings.HasPrefix(sniffed, "text/plain") {
		if t, ok := byExtension[strings.ToLower(path.Ext(name))]; ok {
			return t
		}
	}
	return sniffed
}

// textual reports whether a media type is text a trace keeps as it is.
func textual(mediaType string) bool {
	t, _, _ := strings.Cut(mediaType, ";")
	switch {
	case strings.HasPrefix(t, "text/"), strings.HasSuffix(t, "+xml"), strings.HasSuffix(t, "+json"):
		return true
	}
	switch t {
	case "application/json", "application/x-ndjson", "application/yaml", "application/xml":
		return true
	}
	return false
}
