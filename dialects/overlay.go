package dialects

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/evalflow/evalflow/jsonshape"
)

// overlay checks body against shape and sets model, temperature, top_p,
// the max-tokens fields maxTokens names (told which keys body has) and,
// withSeed, seed: every dialect's overlay.
//
// The shape is the dialect's request shape (in its <dialect>_request.go):
// what its ParseRequest would refuse, found in one pass without decoding,
// before the upstream sees the body. The shapes are built from the very
// types the parsers decode into; their unions and hooks say what the
// parsers read from raw fields. FuzzRequestShape holds them to the parsers.
func overlay(dialect string, body []byte, shape *jsonshape.Shape, model string, s Sampling,
	maxTokens func(has func(string) bool) []string, withSeed bool) (Body, error) {
	out, err := overlayFields(body, shape, func(has func(string) bool) []field {
		var set []field
		if model != "" {
			set = append(set, field{"model", model})
		}
		if s.Temperature != nil {
			set = append(set, field{"temperature", *s.Temperature})
		}
		if s.TopP != nil {
			set = append(set, field{"top_p", *s.TopP})
		}
		if s.MaxTokens != nil {
			for _, name := range maxTokens(has) {
				set = append(set, field{name, *s.MaxTokens})
			}
		}
		if withSeed && s.Seed != nil {
			set = append(set, field{"seed", *s.Seed})
		}
		return set
	})
	if err != nil {
		return nil, fmt.Errorf("%s request: %w", dialect, err)
	}
	return out, nil
}

// overlaySeedless sets model, temperature, top_p and the max-tokens field
// named maxTokens: the overlay of dialects that have no seed (Anthropic,
// Responses).
func overlaySeedless(dialect string, body []byte, shape *jsonshape.Shape, model string, s Sampling, maxTokens string) (Body, error) {
	return overlay(dialect, body, shape, model, s, func(func(string) bool) []string { return []string{maxTokens} }, false)
}

// field is one top-level JSON field to set.
type field struct {
	key   string
	value any
}

// overlayFields checks body against shape, then replaces or appends the
// top-level fields pick returns and keeps every other byte of body, in
// place: the result's pieces are slices of body and the new values. pick
// is told which keys are present.
func overlayFields(body []byte, shape *jsonshape.Shape, pick func(has func(string) bool) []field) (Body, error) {
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
		b, err := json.Marshal(f.value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.key, err)
		}
		if _, dup := set[f.key]; !dup {
			order = append(order, f.key)
		}
		set[f.key] = b
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

	out := make(Body, 0, 2*len(edits)+1)
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
	i := skipSpace(body, 0)
	if body[i] != '{' {
		return nil, 0, errors.New("body is not a JSON object")
	}
	i++
	fields := make(map[string][][2]int, 8)
	insert := i
	for {
		i = skipSpace(body, i)
		switch body[i] {
		case '}':
			return fields, insert, nil
		case ',':
			i = skipSpace(body, i+1)
		}
		ks := i
		i = skipString(body, i)
		raw := body[ks+1 : i-1]
		key := string(raw)
		if bytes.IndexByte(raw, '\\') >= 0 {
			if err := unmarshal(body[ks:i], &key); err != nil {
				return nil, 0, fmt.Errorf("key: %w", err)
			}
		}
		i = skipSpace(body, skipSpace(body, i)+1) // past the colon
		vs := i
		i = skipValue(body, i)
		fields[key] = append(fields[key], [2]int{vs, i})
		insert = i
	}
}

// skipSpace returns the offset of the first byte at or after i that is not
// JSON whitespace. It and the skippers below read JSON already validated.
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
