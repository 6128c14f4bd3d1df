package dockerfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/evalflow/evalflow/tasksets"
)

// CopyInto carries out the plan's COPY and ADD lines from the build
// context ctxDir into dir, the host directory an image sees at mount,
// with Docker's copy semantics (--chown and --chmod ignored). A
// destination outside mount is not copied: it is in the notes returned. A
// symbolic link that points outside the build context, or a special file
// in it, is refused.
func (p Plan) CopyInto(ctxDir, dir, mount string) (notes []string, err error) {
	for _, op := range p.copies {
		note, err := op.copy(ctxDir, dir, mount)
		if err != nil {
			return notes, fmt.Errorf("Dockerfile line %d: %s: %w", op.in.Line, op.in.String(), err)
		}
		if note != "" {
			notes = append(notes, note)
		}
	}
	return notes, nil
}

// CopyContext copies the build context ctxDir as it is into dst (created),
// refusing what CopyInto refuses.
func CopyContext(ctxDir, dst string) error { return copyTree(ctxDir, ctxDir, dst) }

// copy carries out one COPY source with Docker's semantics: a directory's
// contents go into the destination; a file goes to the destination, or
// into it when it is a directory (a trailing slash, several sources, or an
// existing directory).
func (op copyOp) copy(ctxDir, dir, mount string) (note string, err error) {
	rel, ok := strings.CutPrefix(op.dst, mount)
	if !ok || (rel != "" && rel[0] != '/') {
		return fmt.Sprintf("%s: %s is outside the workspace %s, not copied", op.in.String(), op.dst, mount), nil
	}
	dst := filepath.Join(dir, filepath.FromSlash(rel))
	matches, err := filepath.Glob(filepath.Join(ctxDir, filepath.FromSlash(op.src)))
	if err != nil {
		return "", fmt.Errorf("source %s: %w", shorten(op.src, 80), err)
	}
	if len(matches) == 0 {
		return "", fmt.Errorf("source %s: not in the build context", shorten(op.src, 80))
	}
	intoDir := op.intoDir || len(matches) > 1
	for _, m := range matches {
		src, err := inContext(ctxDir, m)
		if err != nil {
			return "", err
		}
		fi, err := os.Stat(src)
		if err != nil {
			return "", err
		}
		switch {
		case fi.IsDir():
			if err := copyTree(ctxDir, src, dst); err != nil {
				return "", err
			}
		case fi.Mode().IsRegular():
			target := dst
			if di, err := os.Stat(dst); intoDir || (err == nil && di.IsDir()) {
				target = filepath.Join(dst, filepath.Base(m))
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return "", err
			}
			if err := copyFile(src, target, fi.Mode().Perm()); err != nil {
				return "", err
			}
		default:
			return "", fmt.Errorf("%s is %s", rel2(ctxDir, m), tasksets.DescribeMode(fi.Mode()))
		}
	}
	return "", nil
}

// inContext resolves the links in p and checks it stays in ctxDir.
func inContext(ctxDir, p string) (string, error) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("%s: %w", rel2(ctxDir, p), errors.Unwrap(err))
	}
	if !within(ctxDir, real) {
		return "", fmt.Errorf("%s points outside the build context", rel2(ctxDir, p))
	}
	return real, nil
}

// copyTree copies the contents of directory src into dst (created),
// keeping permissions; symbolic links are copied as links when they point
// inside ctxDir and refused otherwise, and special files are refused.
func copyTree(ctxDir, src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, fi.Mode().Perm()|0o700)
		case fi.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			resolved := link
			if !filepath.IsAbs(link) {
				resolved = filepath.Join(filepath.Dir(p), link)
			}
			if filepath.IsAbs(link) || !within(ctxDir, resolved) {
				return fmt.Errorf("%s is a symbolic link pointing outside the build context", rel2(ctxDir, p))
			}
			// In the workspace it must not climb out of what is copied.
			if !within(src, resolved) {
				return fmt.Errorf("%s is a symbolic link pointing outside the directory copied", rel2(ctxDir, p))
			}
			_ = os.Remove(target)
			return os.Symlink(link, target)
		case fi.Mode().IsRegular():
			return copyFile(p, target, fi.Mode().Perm())
		default:
			return fmt.Errorf("%s is %s", rel2(ctxDir, p), tasksets.DescribeMode(fi.Mode()))
		}
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	// A link at dst (copied earlier) must not redirect the write.
	if fi, err := os.Lstat(dst); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if err := os.Remove(dst); err != nil {
			return err
		}
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, perm)
}

// within reports whether p is dir or under it (both clean, absolute).
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// rel2 names p relative to the build context, for errors.
func rel2(ctxDir, p string) string {
	if rel, err := filepath.Rel(ctxDir, p); err == nil {
		return rel
	}
	return p
}
