package jsonwire

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
)

// Span is the bytes b[Start:End] of a document.
type Span struct{ Start, End int }

// Member is one member of a JSON object: Key unescaped, At the offset of
// its key's opening quote, Value the bytes of its value.
type Member struct {
	Key   string
	At    int
	Value Span
}

// Members lists, in order, the members of the object whose value starts
// at b[i] (after any whitespace). b must be valid JSON (json.Valid):
// values are skipped by the bytes that end them, never decoded.
func Members(b []byte, i int) ([]Member, error) {
	ms, _, err := members(b, i)
	return ms, err
}

// members is Members, and the offset right after the object's opening
// brace.
func members(b []byte, i int) ([]Member, int, error) {
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != '{' {
		return nil, 0, errors.New("not a JSON object")
	}
	i++
	open := i
	var ms []Member
	for {
		i = skipSpace(b, i)
		if i >= len(b) {
			return nil, 0, errors.New("object not closed")
		}
		switch b[i] {
		case '}':
			return ms, open, nil
		case ',':
			i = skipSpace(b, i+1)
		}
		ks := i
		i = skipString(b, i)
		raw := b[ks+1 : i-1]
		key := string(raw)
		if bytes.IndexByte(raw, '\\') >= 0 {
			if err := Unmarshal(b[ks:i], &key); err != nil {
				return nil, 0, fmt.Errorf("key: %w", err)
			}
		}
		i = skipSpace(b, skipSpace(b, i)+1) // past the colon
		vs := i
		i = skipValue(b, i)
		ms = append(ms, Member{Key: key, At: ks, Value: Span{vs, i}})
	}
}

// Elements lists the spans of the elements of the array whose value
// starts at b[i] (after any whitespace); b must be valid JSON.
func Elements(b []byte, i int) ([]Span, error) {
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != '[' {
		return nil, errors.New("not a JSON array")
	}
	i++
	var es []Span
	for {
		i = skipSpace(b, i)
		if i >= len(b) {
			return nil, errors.New("array not closed")
		}
		switch b[i] {
		case ']':
			return es, nil
		case ',':
			i = skipSpace(b, i+1)
		}
		vs := i
		i = skipValue(b, i)
		es = append(es, Span{vs, i})
	}
}

// Edit replaces the bytes of Span by Text.
type Edit struct {
	Span
	Text []byte
}

// Apply returns a copy of b with edits made; edits do not overlap.
func Apply(b []byte, edits []Edit) []byte {
	if len(edits) == 0 {
		return b
	}
	sort.SliceStable(edits, func(i, j int) bool { return edits[i].Start < edits[j].Start })
	out := make([]byte, 0, len(b))
	pos := 0
	for _, e := range edits {
		out = append(out, b[pos:e.Start]...)
		out = append(out, e.Text...)
		pos = e.End
	}
	return append(out, b[pos:]...)
}

// Remove is the edits that take the members drop picks out of their
// object, each with the comma that joined it to a neighbour, so that the
// object reads as if they had never been written: after a member kept,
// from the end of the value before; before any, up to the next key.
func Remove(ms []Member, drop func(Member) bool) []Edit {
	var edits []Edit
	kept := false
	for k, m := range ms {
		switch {
		case !drop(m):
			kept = true
		case kept:
			edits = append(edits, Edit{Span: Span{ms[k-1].Value.End, m.Value.End}})
		case k+1 < len(ms):
			edits = append(edits, Edit{Span: Span{m.At, ms[k+1].At}})
		default:
			edits = append(edits, Edit{Span: Span{m.At, m.Value.End}})
		}
	}
	return edits
}
