package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Every file a case writes (process logs, runs, server data, the histories
// dumped when a server goes away) lives under suiteRoot, so that the secret
// scan after the last case sees all of it. Secrets the suite learns at run
// time (a rollout's, written down by its harness) are kept in secretsDir,
// outside it.
var suiteRoot, secretsDir string

var (
	secretsMu sync.Mutex
	// secrets are the suite's secrets by name: what the scan looks for.
	secrets = map[string]string{"provider-key": providerKey}
)

// addSecret adds a secret of case t for the scan, named by the case: each
// case's database password and keys are its own, and the scan looks for
// every one.
func addSecret(t *testing.T, name, value string) {
	secretsMu.Lock()
	defer secretsMu.Unlock()
	secrets[t.Name()+": "+name] = value
}

// caseDir is a new directory for a case under the suite's root: its files
// stay until the scan after the last case.
func caseDir(t *testing.T) string {
	t.Helper()
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	dir, err := os.MkdirTemp(suiteRoot, name+"-")
	require.NoError(t, err)
	return dir
}

// secretHit is a secret found in a file: its name and where, never the
// secret itself.
type secretHit struct {
	File, Secret string
	Offset       int64
}

func (h secretHit) String() string {
	return fmt.Sprintf("%s found in %s at byte %d", h.Secret, h.File, h.Offset)
}

// scanStats is what a scan read.
type scanStats struct {
	Files int
	Bytes int64
}

// scanChunk is how much of a file the scan reads at a time.
const scanChunk = 1 << 20

// scanForSecrets reads every file under root for every secret, in chunks
// that overlap by the longest secret, so that one across two reads is found.
func scanForSecrets(root string, secrets map[string]string) ([]secretHit, scanStats, error) {
	var hits []secretHit
	var st scanStats
	longest := 0
	for _, v := range secrets {
		longest = max(longest, len(v))
	}
	names := make([]string, 0, len(secrets))
	for name := range secrets {
		names = append(names, name)
	}
	sort.Strings(names)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		st.Files++
		buf := make([]byte, longest+scanChunk)
		var base int64 // the file offset of buf[0]
		kept := 0      // bytes carried over from the last read
		found := map[string]bool{}
		for {
			n, rerr := io.ReadFull(f, buf[kept:kept+scanChunk])
			st.Bytes += int64(n)
			window := buf[:kept+n]
			for _, name := range names {
				if i := bytes.Index(window, []byte(secrets[name])); i >= 0 && !found[name] {
					found[name] = true
					hits = append(hits, secretHit{File: path, Secret: name, Offset: base + int64(i)})
				}
			}
			if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
				return nil
			}
			if rerr != nil {
				return rerr
			}
			kept = min(longest-1, len(window))
			base += int64(len(window) - kept)
			copy(buf, window[len(window)-kept:])
		}
	})
	return hits, st, err
}

// readSecretFiles adds the secrets harnesses wrote down in dir, one a file,
// named by the file.
func readSecretFiles(dir string, into map[string]string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		if v := strings.TrimSpace(string(b)); v != "" {
			into[e.Name()] = v
		}
	}
	return nil
}

// scanSuite is the scan after the last case: every file under the suite's
// root for every secret the suite used. It returns what to print and
// whether the scan passed.
func scanSuite() (string, bool) {
	secretsMu.Lock()
	all := map[string]string{}
	for k, v := range secrets {
		all[k] = v
	}
	secretsMu.Unlock()
	if err := readSecretFiles(secretsDir, all); err != nil {
		return "faults: secret scan: " + err.Error(), false
	}
	hits, st, err := scanForSecrets(suiteRoot, all)
	if err != nil {
		return "faults: secret scan: " + err.Error(), false
	}
	histories, _ := filepath.Glob(filepath.Join(suiteRoot, "histories", "*.json"))
	if len(hits) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "faults: secret scan FAILED: %d hits\n", len(hits))
		for _, h := range hits {
			fmt.Fprintf(&b, "faults: secret scan: %s\n", h)
		}
		return b.String(), false
	}
	return fmt.Sprintf("figure: secret scan after every case: %d secrets (%s) in %d files (%d workflow histories, logs, runs, server data), %.1f MB: 0 hits",
		len(all), secretKinds(all), st.Files, len(histories), float64(st.Bytes)/(1<<20)), true
}

// secretKinds sums up the secrets by kind, for the scan's figure.
func secretKinds(all map[string]string) string {
	kinds := map[string]int{}
	for name := range all {
		kind, _, _ := strings.Cut(name, "-")
		kinds[kind]++
	}
	var parts []string
	for k, n := range kinds {
		parts = append(parts, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// dumpHistories writes every workflow history on the server at addr to
// suiteRoot/histories, for the secret scan: each event as JSON, and as its
// wire bytes, in which payloads appear as they are (JSON shows them in
// base64).
func dumpHistories(t *testing.T, addr string) {
	t.Helper()
	c := dial(t, addr)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(suiteRoot, "histories")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{PageSize: 1000, NextPageToken: token})
		require.NoError(t, err)
		for _, ex := range resp.GetExecutions() {
			id, runID := ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId()
			var js, wire bytes.Buffer
			it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				require.NoError(t, err)
				j, err := protojson.Marshal(ev)
				require.NoError(t, err)
				js.Write(j)
				js.WriteByte('\n')
				w, err := proto.Marshal(ev)
				require.NoError(t, err)
				wire.Write(w)
			}
			name := strings.NewReplacer("/", "_").Replace(t.Name() + "-" + id + "-" + runID)
			require.NoError(t, os.WriteFile(filepath.Join(dir, name+".json"), js.Bytes(), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(dir, name+".pb"), wire.Bytes(), 0o644))
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return
		}
	}
}

// TestSecretScanFindsAPlantedSecret: the scan finds a secret however a file
// holds it (whole, across two of its reads, in a nested directory), names
// the file and the secret's name, and never prints the secret.
func TestSecretScanFindsAPlantedSecret(t *testing.T) {
	root := t.TempDir()
	secret := "sk-planted-" + strings.Repeat("x", 40)
	clean := map[string]string{"a": "nothing to see", "b.log": strings.Repeat("y", 3<<20)}
	for name, body := range clean {
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte(body), 0o644))
	}
	hits, st, err := scanForSecrets(root, map[string]string{"planted key": secret})
	require.NoError(t, err)
	assert.Empty(t, hits, "no secret in clean files")
	assert.Equal(t, 2, st.Files)

	nested := filepath.Join(root, "runs", "r1")
	require.NoError(t, os.MkdirAll(nested, 0o755))
	// Across the boundary of the scanner's first read.
	across := bytes.Repeat([]byte{'z'}, 3*scanChunk)
	copy(across[scanChunk-10:], secret)
	require.NoError(t, os.WriteFile(filepath.Join(nested, "rollouts.jsonl"), across, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "worker.log"), []byte("level=warn key="+secret+"\n"), 0o644))

	hits, _, err = scanForSecrets(root, map[string]string{"planted key": secret, "other": "never-written-anywhere"})
	require.NoError(t, err)
	require.Len(t, hits, 2)
	byFile := map[string]secretHit{}
	for _, h := range hits {
		byFile[filepath.Base(h.File)] = h
		assert.Equal(t, "planted key", h.Secret)
		assert.NotContains(t, h.String(), secret, "a hit never prints the secret")
	}
	assert.Equal(t, int64(scanChunk-10), byFile["rollouts.jsonl"].Offset)
	assert.Equal(t, int64(len("level=warn key=")), byFile["worker.log"].Offset)
}
