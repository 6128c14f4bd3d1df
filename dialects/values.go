package dialects

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

// scalarContent reads content given as null, absent or a JSON string; ok is
// false when raw is something else (an array of parts). raw is a decoded
// json.RawMessage, which the string may share (jsonwire.UnquoteOwned).
func scalarContent(raw json.RawMessage) (parts []Part, ok bool, err error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, true, nil
	}
	if raw[0] != '"' {
		return nil, false, nil
	}
	s, err := jsonwire.UnquoteOwned(raw)
	if err != nil {
		return nil, true, fmt.Errorf("content: %w", err)
	}
	if s == "" {
		return nil, true, nil
	}
	return []Part{{Type: PartText, Text: s}}, true, nil
}

// contentPart is an item of a dialect's array of content parts.
type contentPart interface {
	// part is the item as a Part (ok), the text of a refusal, or neither:
	// an item of a type evalflow does not keep.
	part() (part Part, ok bool, refusal string)
}

// readContent reads content that is absent, a string, or an array of
// parts of type P; refusal parts are returned apart.
func readContent[P contentPart](raw json.RawMessage) ([]Part, string, error) {
	raw = bytes.TrimSpace(raw)
	if parts, ok, err := scalarContent(raw); ok {
		return parts, "", err
	}
	var ps []P
	if err := jsonwire.Unmarshal(raw, &ps); err != nil {
		return nil, "", fmt.Errorf("content: %w", err)
	}
	var parts []Part
	var refusal string
	for _, p := range ps {
		part, ok, r := p.part()
		if ok {
			parts = append(parts, part)
		}
		refusal += r
	}
	return parts, refusal, nil
}

// rawArgs turns tool-call arguments into a JSON value: empty is {}, text that
// is not JSON becomes a JSON string.
func rawArgs(args string) json.RawMessage {
	s := strings.TrimSpace(args)
	if s == "" {
		return json.RawMessage(`{}`)
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

// jsonScalarText renders a JSON string or number as text; null and others give "".
func jsonScalarText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// presentJSON is raw unless it is absent or null.
func presentJSON(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	return raw
}
