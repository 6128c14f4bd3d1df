package harness

import (
	"io"
	"sync"
	"unicode/utf8"
)

// DefaultOutputLimit is the stdout and stderr tail kept when Spec.OutputLimit is 0.
const DefaultOutputLimit = 16 << 10

// Tail is a writer that keeps the last limit bytes written (0:
// DefaultOutputLimit).
type Tail interface {
	io.Writer
	String() string
}

// NewTail is a Tail of limit bytes.
func NewTail(limit int) Tail { return newTail(limit) }

// tail is an io.Writer that keeps only the last limit bytes written to it, in
// a fixed ring, so a chatty harness costs bounded memory and is never blocked.
type tail struct {
	mu    sync.Mutex
	buf   []byte
	pos   int // next write position in buf
	full  bool
	limit int
}

func newTail(limit int) *tail {
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	return &tail{limit: limit}
}

// Write never fails and always reports all of p written.
func (t *tail) Write(p []byte) (int, error) {
	n := len(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.buf == nil {
		t.buf = make([]byte, t.limit)
	}
	if len(p) >= t.limit {
		copy(t.buf, p[len(p)-t.limit:])
		t.pos, t.full = 0, true
		return n, nil
	}
	c := copy(t.buf[t.pos:], p)
	if c < len(p) {
		copy(t.buf, p[c:])
		t.full = true
	}
	t.pos = (t.pos + len(p)) % t.limit
	if t.pos == 0 && len(p) > 0 {
		t.full = true
	}
	return n, nil
}

// String returns the kept tail. When older bytes were dropped, a rune cut in
// half at the start is dropped too.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.full {
		return string(t.buf[:t.pos])
	}
	out := make([]byte, 0, t.limit)
	out = append(out, t.buf[t.pos:]...)
	out = append(out, t.buf[:t.pos]...)
	for i := 0; i < utf8.UTFMax-1 && len(out) > 0 && !utf8.RuneStart(out[0]); i++ {
		out = out[1:]
	}
	return string(out)
}
