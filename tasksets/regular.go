package tasksets

import "os"

// OpenRegular opens path for reading if it is a regular file, as every
// file-backed taskset does: a FIFO, a device or a socket is refused before
// it is read (the error wraps ErrNotRegular).
func OpenRegular(path string) (*os.File, error) { return openRegular(path) }
