package tasksets

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
)

// HarborSampleName is the bundled Harbor taskset's reference.
const HarborSampleName = "harbor-sample"

// harborSampleFS holds the bundled Harbor tasks, sources in
// data/harbor-sample/.
//
//go:embed all:data/harbor-sample
var harborSampleFS embed.FS

const harborSampleRoot = "data/harbor-sample"

var harborSample struct {
	once sync.Once
	dir  string
	err  error
}

// HarborSample opens the bundled Harbor taskset: small shell tasks that run
// on any Linux machine with a POSIX shell, bash and coreutils. Their files
// are extracted on first use to a cache directory named by a hash of their
// content (under os.UserCacheDir, else the temp dir), so workers of one
// build agree on every path and a fresh machine needs nothing else.
func HarborSample() (*Harbor, error) {
	harborSample.once.Do(func() {
		harborSample.dir, harborSample.err = extractHarborSample()
	})
	if harborSample.err != nil {
		return nil, harborSample.err
	}
	return OpenHarbor(harborSample.dir)
}

// HarborSampleDir extracts the bundled Harbor taskset if needed and returns
// its directory.
func HarborSampleDir() (string, error) {
	h, err := HarborSample()
	if err != nil {
		return "", err
	}
	return h.Dir(), nil
}

// extractHarborSample writes the bundled tasks to their cache directory,
// unless a complete copy is there: a copy is written beside it and renamed
// into place, so a reader never sees half of one.
func extractHarborSample() (string, error) {
	sum, err := harborSampleHash()
	if err != nil {
		return "", fmt.Errorf("bundled harbor tasks: %w", err)
	}
	base, err := os.UserCacheDir()
	if err != nil || base == "" {
		base = os.TempDir()
	}
	parent := filepath.Join(base, "evalflow")
	dir := filepath.Join(parent, HarborSampleName+"-"+sum[:16])
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return dir, nil
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("bundled harbor tasks: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, ".extract-*")
	if err != nil {
		return "", fmt.Errorf("bundled harbor tasks: %w", err)
	}
	if err := writeHarborSample(tmp); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("bundled harbor tasks: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		// Another process put its copy there first.
		if fi, statErr := os.Stat(dir); statErr == nil && fi.IsDir() {
			return dir, nil
		}
		return "", fmt.Errorf("bundled harbor tasks: %w", err)
	}
	return dir, nil
}

// writeHarborSample writes the embedded tree under dst. Embedding keeps no
// file modes: shell scripts (*.sh) are made executable, the rest is 0644.
func writeHarborSample(dst string) error {
	if err := os.Chmod(dst, 0o755); err != nil {
		return err
	}
	return fs.WalkDir(harborSampleFS, harborSampleRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, harborSampleRoot), "/")
		if rel == "" {
			return nil
		}
		target := filepath.Join(dst, filepath.FromSlash(rel))
		if d.IsDir() {
			return os.Mkdir(target, 0o755)
		}
		b, err := harborSampleFS.ReadFile(p)
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if path.Ext(p) == ".sh" {
			mode = 0o755
		}
		return os.WriteFile(target, b, mode)
	})
}

// harborSampleHash is a hash of the embedded tree's paths and contents.
func harborSampleHash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(harborSampleFS, harborSampleRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := harborSampleFS.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
