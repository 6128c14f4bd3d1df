package dialects

import (
	"io"
	"net"
	"slices"
)

// Body is a request body in pieces, sent in order: the caller's bytes and
// the overlay's edits between them, so that a large request reaches the
// upstream without being copied into a new buffer first.
type Body [][]byte

// Len is the body's length in bytes.
func (b Body) Len() int {
	n := 0
	for _, p := range b {
		n += len(p)
	}
	return n
}

// Bytes joins the pieces.
func (b Body) Bytes() []byte {
	if len(b) == 1 {
		return b[0]
	}
	out := make([]byte, 0, b.Len())
	for _, p := range b {
		out = append(out, p...)
	}
	return out
}

// Reader reads the pieces in order; every call starts from the beginning,
// so a retried request can send the body again.
func (b Body) Reader() io.Reader {
	bufs := net.Buffers(slices.Clone(b))
	return &bufs
}
