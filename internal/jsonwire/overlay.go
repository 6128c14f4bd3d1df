package jsonwire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// Field is a top-level field of a JSON object to set: Value is written as
// json.Marshal writes it.
type Field struct {
	Key   string
	Value any
}

// Overlay checks body against shape, then replaces or appends the
// top-level fields pick returns and keeps every other byte of body: the
// result is body in pieces, to be sent in order, each a slice of body or a
// new value, so that a large body is never copied. pick is told which keys
// body has. A key body repeats is replaced in every place, so that no
// reader sees the old value; a key pick repeats takes its last value.
func Overlay(body []byte, shape *Shape, pick func(has func(string) bool) []Field) ([][]byte, error) {
	if err := shape.Check(body); err != nil {
		return nil, err
	}
	fields, end, err := topLevelFields(body)
	if err != nil {
		return nil, err
	}
	set := make(map[string][]byte)
	var order []string
	for _, f := range pick(func(k string) bool { _, ok := fields[k]; return ok }) {
		b, err := json.Marshal(f.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Key, err)
		}
		if _, dup := set[f.Key]; !dup {
			order = append(order, f.Key)
		}
		set[f.Key] = b
	}

	type edit struct {
		start, end int
		text       []byte
	}
	var edits []edit
	var appended []byte
	for _, key := range order {
		spans, ok := fields[key]
		if !ok {
			kb, _ := json.Marshal(key)
			if len(fields) > 0 || len(appended) > 0 {
				appended = append(appended, ',')
			}
			appended = append(appended, kb...)
			appended = append(appended, ':')
			appended = append(appended, set[key]...)
			continue
		}
		// A duplicated key is replaced everywhere, so no reader can see the old value.
		for _, sp := range spans {
			edits = append(edits, edit{sp[0], sp[1], set[key]})
		}
	}
	if len(appended) > 0 {
		edits = append(edits, edit{end, end, appended})
	}
	sort.Slice(edits, func(i, j int) bool { return edits[i].start < edits[j].start })

	out := make([][]byte, 0, 2*len(edits)+1)
	pos := 0
	for _, e := range edits {
		if e.start > pos {
			out = append(out, body[pos:e.start])
		}
		out = append(out, e.text)
		pos = e.end
	}
	return append(out, body[pos:]), nil
}

// topLevelFields finds the byte span of every top-level value of a JSON object,
// by key, and the offset where a new field goes: after the last value, or after
// the opening brace of an empty object. body must be valid JSON: values are
// skipped by looking only for the bytes that end them, never copied or
// decoded.
func topLevelFields(body []byte) (map[string][][2]int, int, error) {
	ms, open, err := members(body, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("body: %w", err)
	}
	fields := make(map[string][][2]int, max(len(ms), 8))
	insert := open
	for _, m := range ms {
		fields[m.Key] = append(fields[m.Key], [2]int{m.Value.Start, m.Value.End})
		insert = m.Value.End
	}
	return fields, insert, nil
}

// skipSpace returns the offset of the first byte at or after i that is not
// JSON whitespace, or len(b). The skippers below, unlike it, read only JSON
// already validated.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the offset after the string starting at b[i].
func skipString(b []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b)
		}
		j += k
		n := 0 // backslashes right before the quote: an odd count escapes it
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
}

// skipValue returns the offset after the value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); {
			switch b[j] {
			case '"':
				j = skipString(b, j)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
			j++
		}
		return len(b)
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		return j
	}
}
