package dialects

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
)

// OverlayChat sets model and the sampling fields s sets on a chat completions
// request body and keeps every other byte as the caller sent it: unknown
// fields, key order, whitespace and the messages array are untouched. A
// max-tokens limit goes into max_completion_tokens when the caller used that
// name, into max_tokens otherwise.
func OverlayChat(body []byte, model string, s Sampling) ([]byte, error) {
	out, err := overlayFields(body, func(has func(string) bool) []field {
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
			hasNew, hasOld := has("max_completion_tokens"), has("max_tokens")
			if hasNew {
				set = append(set, field{"max_completion_tokens", *s.MaxTokens})
			}
			if hasOld || !hasNew {
				set = append(set, field{"max_tokens", *s.MaxTokens})
			}
		}
		if s.Seed != nil {
			set = append(set, field{"seed", *s.Seed})
		}
		return set
	})
	if err != nil {
		return nil, fmt.Errorf("overlay chat request: %w", err)
	}
	return out, nil
}

// field is one top-level JSON field to set.
type field struct {
	key   string
	value any
}

// overlayFields replaces or appends the top-level fields pick returns and
// keeps every other byte of body. pick is told which keys are present.
func overlayFields(body []byte, pick func(has func(string) bool) []field) ([]byte, error) {
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

	out := make([]byte, 0, len(body)+len(appended)+64)
	pos := 0
	for _, e := range edits {
		out = append(out, body[pos:e.start]...)
		out = append(out, e.text...)
		pos = e.end
	}
	return append(out, body[pos:]...), nil
}

// topLevelFields finds the byte span of every top-level value of a JSON object,
// by key, and the offset where a new field goes: after the last value, or after
// the opening brace of an empty object. Values are skipped, not decoded.
func topLevelFields(body []byte) (map[string][][2]int, int, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return nil, 0, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, 0, errors.New("body is not a JSON object")
	}
	fields := make(map[string][][2]int)
	insert := int(dec.InputOffset())
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, 0, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, 0, fmt.Errorf("unexpected token %v", tok)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, 0, fmt.Errorf("field %q: %w", key, err)
		}
		end := int(dec.InputOffset())
		fields[key] = append(fields[key], [2]int{end - len(raw), end})
		insert = end
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, 0, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, 0, errors.New("trailing data after JSON object")
	}
	return fields, insert, nil
}
