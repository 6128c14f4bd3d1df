package jsonwire

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTopLevelFieldsSpans checks the spans the overlay edits against tricky
// strings, nesting and duplicated keys.
func TestTopLevelFieldsSpans(t *testing.T) {
	tests := []struct {
		body   string
		want   map[string][]string
		insert string // the body up to the insertion offset
	}{
		{body: `{}`, want: map[string][]string{}, insert: `{`},
		{body: " { } ", want: map[string][]string{}, insert: ` {`},
		{
			body: `{"a" : 1 , "b":"x\"y\\","c":[1,{"d":"}"}],"e":{"f":[]},"g":null,"a":-1.5e3}`,
			want: map[string][]string{
				"a": {`1`, `-1.5e3`}, "b": {`"x\"y\\"`}, "c": {`[1,{"d":"}"}]`}, "e": {`{"f":[]}`}, "g": {`null`},
			},
			insert: `{"a" : 1 , "b":"x\"y\\","c":[1,{"d":"}"}],"e":{"f":[]},"g":null,"a":-1.5e3`,
		},
		{body: `{"k\u0041":"v"}`, want: map[string][]string{"kA": {`"v"`}}, insert: `{"k\u0041":"v"`},
		{body: "{\n\t\"a\"\t:\n[ 1 , 2 ]\n}\n", want: map[string][]string{"a": {"[ 1 , 2 ]"}}, insert: "{\n\t\"a\"\t:\n[ 1 , 2 ]"},
	}
	for _, tt := range tests {
		fields, insert, err := topLevelFields([]byte(tt.body))
		require.NoError(t, err, "topLevelFields(%q)", tt.body)
		got := map[string][]string{}
		for k, spans := range fields {
			for _, sp := range spans {
				got[k] = append(got[k], tt.body[sp[0]:sp[1]])
			}
		}
		assert.Equal(t, tt.want, got, "topLevelFields(%q) fields", tt.body)
		assert.Equal(t, tt.insert, tt.body[:insert], "topLevelFields(%q) insert", tt.body)
	}
}

func TestOverlay(t *testing.T) {
	shape := Of(reflect.TypeFor[request]())
	tests := []struct {
		body string
		set  []Field
		want string
	}{
		{`{}`, []Field{{Key: "model", Value: "m"}}, `{"model":"m"}`},
		{` { } `, []Field{{Key: "model", Value: "m"}, {Key: "seed", Value: 3}}, ` {"model":"m","seed":3 } `},
		{`{"model" : "a", "x":[1,"}"] ,"model":"b"}`, []Field{{Key: "model", Value: "m"}}, `{"model" : "m", "x":[1,"}"] ,"model":"m"}`},
		{`{"x":1}`, []Field{{Key: "model", Value: "a"}, {Key: "model", Value: "b"}}, `{"x":1,"model":"b"}`},
		{`{"x":1}`, nil, `{"x":1}`},
	}
	for _, tt := range tests {
		pieces, err := Overlay([]byte(tt.body), shape, func(func(string) bool) []Field { return tt.set })
		require.NoError(t, err, "Overlay(%q)", tt.body)
		assert.Equal(t, tt.want, string(bytes.Join(pieces, nil)), "Overlay(%q)", tt.body)
	}
	for _, body := range []string{`[]`, `{"model":7}`, `{"model":"m"`, `{"model":"m"} {}`} {
		_, err := Overlay([]byte(body), shape, func(func(string) bool) []Field { return nil })
		assert.Error(t, err, "Overlay(%q)", body)
	}
}

func ExampleOverlay() {
	body := []byte(`{"model":"caller", "messages":[{"role":"user","content":"hi"}]}`)
	pieces, err := Overlay(body, Of(reflect.TypeFor[request]()), func(has func(string) bool) []Field {
		set := []Field{{Key: "model", Value: "upstream"}}
		if !has("temperature") {
			set = append(set, Field{Key: "temperature", Value: 0.2})
		}
		return set
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s\n", bytes.Join(pieces, nil))
	// Output: {"model":"upstream", "messages":[{"role":"user","content":"hi"}],"temperature":0.2}
}
