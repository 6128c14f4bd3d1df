package tasksets

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// archiveLimit bounds what a task archive unpacks to.
const archiveLimit = 4 << 30

// ErrNoArchive is wrapped by the error for an archive the registry's
// storage does not serve (it answers 4xx): the registry is wrong or the
// package is not public, and retrying will not help.
var ErrNoArchive = errors.New("archive not served")

// Archive returns the directory holding the task archive at archiveURL
// (a gzipped tar, as Harbor's registry stores a task version), whose
// digest is digest, downloading and unpacking it on first use. The cache
// keeps one copy per URL and digest.
func (c *GitCache) Archive(ctx context.Context, archiveURL, digest string) (string, error) {
	return c.fill("archive\n"+archiveURL+"\n"+digest, func(tmp string) error {
		resp, err := hubDo(ctx, nil, archiveURL, "")
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var se *statusError
			if errors.As(err, &se) && se.Code < 500 {
				return fmt.Errorf("%s: %s (%w)", redactURL(archiveURL), se.Status, ErrNoArchive)
			}
			return &FetchError{URL: archiveURL, Commit: digest, Git: err.Error(), Archive: true}
		}
		defer resp.Body.Close()
		if err := untar(resp.Body, tmp); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("unpack %s: %w", redactURL(archiveURL), err)
		}
		return nil
	})
}

// untar unpacks the gzipped tar r into dir: directories and regular files
// only, every name inside dir. A link or a device is refused by name.
func untar(r io.Reader, dir string) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	var total int64
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
		if name == "." {
			continue
		}
		if path.IsAbs(hdr.Name) || strings.Contains(hdr.Name, "\\") || slices.Contains(strings.Split(hdr.Name, "/"), "..") {
			return fmt.Errorf("entry %q leaves the task directory", hdr.Name)
		}
		dst := filepath.Join(dir, filepath.FromSlash(name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(dst, 0o755)
		case tar.TypeReg:
			total += hdr.Size
			if total > archiveLimit {
				return fmt.Errorf("unpacks to more than %d GiB", archiveLimit>>30)
			}
			err = writeEntry(dst, tr, hdr.FileInfo().Mode().Perm())
		default:
			return fmt.Errorf("entry %q is a link or a special file, which a task archive may not hold", hdr.Name)
		}
		if err != nil {
			return err
		}
	}
}

// writeEntry writes r to a new file dst, its directory made as needed.
func writeEntry(dst string, r io.Reader, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm|0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
