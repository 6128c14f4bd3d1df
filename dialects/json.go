package dialects

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
	"unsafe"

	jsonv1 "github.com/go-json-experiment/json/v1"
)

// unmarshal decodes as encoding/json's Unmarshal does, by the same rules,
// about three times faster: it is the engine of encoding/json v2 run in its
// v1 mode. Every parser here decodes with it; the request shapes (in
// each <dialect>_request.go) model the same rules, and FuzzRequestShape
// holds the two together.
//
// Most documents take fastDecode's one pass instead (fastjson.go); what it
// leaves, v1 mode decodes from a zero value again. v must point to a zero
// value, as at every call here.
func unmarshal(data []byte, v any) error {
	if fastDecode(data, v) {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero()
	return jsonv1.Unmarshal(data, v)
}

// unmarshalOwned is unmarshal for a document the caller keeps and never
// changes again, such as a request or answer read for the trace: long
// strings and raw values of the result share data's memory instead of
// copying it, so a long content costs a scan, not an allocation and a
// copy.
func unmarshalOwned(data []byte, v any) error {
	if fastDecodeInto(data, v, true) {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero()
	return jsonv1.Unmarshal(data, v)
}

// unquote decodes a JSON string that an enclosing Unmarshal has already
// validated. Without escapes and with valid UTF-8, the bytes between the
// quotes are the string: a prompt of a megabyte is then copied once
// instead of being scanned twice more.
func unquote(raw []byte) (string, error) {
	// Valid JSON, the string has no quote inside but behind a backslash.
	if len(raw) >= 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw[1:len(raw)-1], '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	err := unmarshal(raw, &s)
	return s, err
}

// unquoteOwned is unquote for a value nobody changes again, such as a
// json.RawMessage field just decoded (its decoder copied it, or it shares
// a document that is kept: unmarshalOwned): a string without escapes
// shares its bytes instead of copying them.
func unquoteOwned(raw []byte) (string, error) {
	if len(raw) > 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw[1:len(raw)-1], '\\') < 0 && utf8.Valid(raw) {
		return unsafe.String(&raw[1], len(raw)-2), nil
	}
	return unquote(raw)
}

// scalarContent reads content given as null, absent or a JSON string; ok is
// false when raw is something else (an array of parts). raw is a decoded
// json.RawMessage, which the string may share (unquoteOwned).
func scalarContent(raw json.RawMessage) (parts []Part, ok bool, err error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, true, nil
	}
	if raw[0] != '"' {
		return nil, false, nil
	}
	s, err := unquoteOwned(raw)
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
