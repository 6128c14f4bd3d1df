package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"unicode/utf8"
)

// readFile returns a text file's content, up to readLimit bytes.
func (tb *tools) readFile(path string) result {
	abs := tb.resolve(path)
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return failed("read_file: %s does not exist", path)
	case err != nil:
		return failed("read_file: %v", err)
	case fi.IsDir():
		return failed("read_file: %s is a directory; list it with shell (ls)", path)
	case !fi.Mode().IsRegular():
		// A FIFO or a device could block or never end.
		return failed("read_file: %s is not a regular file", path)
	case fi.Size() > readLimit:
		return failed("read_file: %s is %d bytes, more than the %d read_file returns; "+
			"read parts of it with shell (head, tail, sed -n, grep)", path, fi.Size(), readLimit)
	}
	f, err := os.Open(abs)
	if err != nil {
		return failed("read_file: %v", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, readLimit+1))
	switch {
	case err != nil:
		return failed("read_file: %v", err)
	case len(data) > readLimit:
		return failed("read_file: %s grew past the %d bytes read_file returns", path, readLimit)
	case !utf8.Valid(data):
		return failed("read_file: %s is not UTF-8 text; inspect it with shell (od, file)", path)
	case len(data) == 0:
		return result{text: "(empty file)"}
	}
	return result{text: string(data)}
}

// writeFile writes content to path, creating missing parent directories.
// An existing file keeps its mode.
func (tb *tools) writeFile(path, content string) result {
	abs := tb.resolve(path)
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return failed("write_file: %v", err)
	}
	if err := os.WriteFile(abs, []byte(content), 0o644); err != nil {
		return failed("write_file: %v", err)
	}
	return result{text: fmt.Sprintf("wrote %d bytes to %s", len(content), path)}
}
