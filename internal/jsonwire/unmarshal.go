package jsonwire

import (
	"bytes"
	"reflect"
	"unicode/utf8"
	"unsafe"

	jsonv1 "github.com/go-json-experiment/json/v1"
)

// Unmarshal decodes as encoding/json's Unmarshal does, by the same rules,
// about three times faster: it is the engine of encoding/json v2 run in its
// v1 mode.
//
// Most documents take fastDecode's one pass instead (fast.go); what it
// leaves, v1 mode decodes from a zero value again. v must point to a zero
// value.
func Unmarshal(data []byte, v any) error {
	if fastDecode(data, v) {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero()
	return jsonv1.Unmarshal(data, v)
}

// UnmarshalOwned is Unmarshal for a document the caller keeps and never
// changes again, such as a request or answer read for the trace: long
// strings and raw values of the result share data's memory instead of
// copying it, so a long content costs a scan, not an allocation and a
// copy.
func UnmarshalOwned(data []byte, v any) error {
	if fastDecodeInto(data, v, true) {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero()
	return jsonv1.Unmarshal(data, v)
}

// Unquote decodes a JSON string that an enclosing Unmarshal has already
// validated. Without escapes and with valid UTF-8, the bytes between the
// quotes are the string: a prompt of a megabyte is then copied once
// instead of being scanned twice more.
func Unquote(raw []byte) (string, error) {
	// Valid JSON, the string has no quote inside but behind a backslash.
	if len(raw) >= 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw[1:len(raw)-1], '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	err := Unmarshal(raw, &s)
	return s, err
}

// UnquoteOwned is Unquote for a value nobody changes again, such as a
// json.RawMessage field just decoded (its decoder copied it, or it shares
// a document that is kept: UnmarshalOwned): a string without escapes
// shares its bytes instead of copying it.
func UnquoteOwned(raw []byte) (string, error) {
	if len(raw) > 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw[1:len(raw)-1], '\\') < 0 && utf8.Valid(raw) {
		return unsafe.String(&raw[1], len(raw)-2), nil
	}
	return Unquote(raw)
}
