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
