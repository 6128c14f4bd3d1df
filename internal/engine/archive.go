package engine

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
)

// CopyIn extracts a tar stream into the container at dir, which must exist.
func (c *Client) CopyIn(ctx context.Context, id, dir string, archive io.Reader) error {
	return c.callBody(ctx, http.MethodPut, "/containers/"+url.PathEscape(id)+"/archive", url.Values{"path": {dir}}, archive, "application/x-tar")
}

// CopyOut is a tar stream of path in the container; the caller closes it.
func (c *Client) CopyOut(ctx context.Context, id, p string) (io.ReadCloser, error) {
	resp, err := c.request(ctx, http.MethodGet, "/containers/"+url.PathEscape(id)+"/archive", url.Values{"path": {p}}, nil, "")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// CopyDirIn copies the host directory src into the container as dst (an
// absolute path whose parent exists), contents and modes kept, owned by root.
func (c *Client) CopyDirIn(ctx context.Context, id, src, dst string) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(TarDir(pw, src, path.Base(dst))) }()
	err := c.CopyIn(ctx, id, path.Dir(dst), pr)
	pr.CloseWithError(io.ErrClosedPipe)
	return err
}

func (c *Client) callBody(ctx context.Context, method, p string, q url.Values, body io.Reader, ct string) error {
	resp, err := c.request(ctx, method, p, q, body, ct)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// TarDir writes the tree under src to w as a tar stream, its entries
// under prefix ("" or "." puts them at the top), symbolic links kept as
// links; special files are refused.
func TarDir(w io.Writer, src, prefix string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		name := path.Join(prefix, filepath.ToSlash(rel))
		if name == "." {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		case fi.IsDir(), fi.Mode().IsRegular():
		default:
			return fmt.Errorf("%s: a special file cannot be copied into a container", p)
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = name, 0, 0, "", ""
		if fi.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
