package dialects

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// sse writes Server-Sent Events, flushing after each.
type sse struct {
	w   io.Writer
	err error
}

// event writes one event; a non-empty name adds an event: line. After a
// failed write it does nothing.
func (s *sse) event(name string, v any) {
	if s.err != nil {
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		s.err = fmt.Errorf("encode event: %w", err)
		return
	}
	s.raw(name, data)
}

func (s *sse) raw(name string, data []byte) {
	if s.err != nil {
		return
	}
	var b []byte
	if name != "" {
		b = append(b, "event: "+name+"\n"...)
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	if _, err := s.w.Write(b); err != nil {
		s.err = fmt.Errorf("write event: %w", err)
		return
	}
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// pieces cuts s into at most n pieces of about equal size, on rune
// boundaries; "" gives none.
func pieces(s string, n int) []string {
	if s == "" {
		return nil
	}
	rs := []rune(s)
	size := (len(rs) + n - 1) / n
	var out []string
	for len(rs) > 0 {
		k := min(size, len(rs))
		out = append(out, string(rs[:k]))
		rs = rs[k:]
	}
	return out
}
