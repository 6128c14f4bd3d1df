package tasksets

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by the error for a taskset path that names
// something other than a regular file: a FIFO or a device could block the
// worker reading it, or have effects of its own.
var ErrNotRegular = errors.New("not a regular file")

// openRegular opens path for reading if it is a regular file. The type is
// checked before opening, since opening a device can have effects of its
// own, and again on the opened file, which may have been replaced in
// between: O_NONBLOCK keeps even that open from waiting on a FIFO's writer.
func openRegular(path string) (*os.File, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := checkRegular(path, fi.Mode()); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if fi, err = f.Stat(); err == nil {
		err = checkRegular(path, fi.Mode())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkRegular names what path is when mode is not a regular file's.
func checkRegular(path string, mode fs.FileMode) error {
	if mode.IsRegular() {
		return nil
	}
	return fmt.Errorf("%s is %s: %w", path, DescribeMode(mode), ErrNotRegular)
}

// DescribeMode says what kind of file mode belongs to, for errors that
// name a file without quoting it.
func DescribeMode(mode fs.FileMode) string {
	switch {
	case mode.IsRegular():
		return "a regular file"
	case mode.IsDir():
		return "a directory"
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case mode&fs.ModeCharDevice != 0:
		return "a character device"
	case mode&fs.ModeDevice != 0:
		return "a block device"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeSymlink != 0:
		return "a symbolic link"
	default:
		return "a special file"
	}
}
