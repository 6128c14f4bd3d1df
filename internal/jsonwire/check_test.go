package jsonwire_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

// sample has a field of every kind a Shape models.
type sample struct {
	S     string            `json:"s"`
	B     bool              `json:"b"`
	I     int               `json:"i"`
	I8    int8              `json:"i8"`
	U     uint16            `json:"u"`
	F     *float64          `json:"f"`
	F32   float32           `json:"f32"`
	Raw   json.RawMessage   `json:"raw"`
	List  []part            `json:"list"`
	Ptr   *part             `json:"ptr"`
	Map   map[string]int    `json:"map"`
	Multi [][]string        `json:"multi"`
	Named string            // matched by its Go name, case-insensitively
	Skip  chan int          `json:"-"`
	Union json.RawMessage   `json:"union"`
	Deep  map[string][]part `json:"deep"`
	self  *sample
}

type part struct {
	Type string `json:"type"`
	N    *int   `json:"n,omitempty"`
	Next *part  `json:"next"`
}

var sampleShape = jsonwire.Of(reflect.TypeFor[sample](),
	jsonwire.Union(reflect.TypeFor[sample](), "union", reflect.TypeFor[string](), reflect.TypeFor[[]part]()))

// unionOK is what a reader of sample.Union accepts: what Union describes.
func unionOK(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" || s[0] == '"' {
		return true
	}
	var ps []part
	return json.Unmarshal(raw, &ps) == nil
}

// decodes is the oracle: encoding/json decodes b into sample, and the
// union field holds what it may.
func decodes(b []byte) bool {
	var v sample
	return json.Unmarshal(b, &v) == nil && unionOK(v.Union)
}

var rawShape = jsonwire.Of(reflect.TypeFor[json.RawMessage]())

func TestCheck(t *testing.T) {
	tests := []struct {
		body string
		ok   bool
		path string // of the error
	}{
		{`{}`, true, ""},
		{`null`, true, ""},
		{` {"s":"x","b":true,"i":-3,"i8":127,"u":65535,"f":1.5e3,"f32":1,"raw":{"a":[1,{}]}} `, true, ""},
		{`{"S":"x","NAMED":"y","named":null}`, true, ""},
		{`{"\u0073":"x"}`, true, ""},
		{`{"\u0073":5}`, false, "s"},
		{`{"s":5}`, false, "s"},
		{`{"b":"true"}`, false, "b"},
		{`{"i":1.0}`, false, "i"},
		{`{"i":1e2}`, false, "i"},
		{`{"i8":128}`, false, "i8"},
		{`{"u":-1}`, false, "u"},
		{`{"f":1e400}`, false, "f"},
		{`{"f32":1e39}`, false, "f32"},
		{`{"f":1e-400}`, true, ""},
		{`{"list":[{"type":"a"},null,{"type":"b","n":2,"next":{"type":"c"}}]}`, true, ""},
		{`{"list":[{"type":"a"},{"type":7}]}`, false, "list[1].type"},
		{`{"list":[{"type":"a","next":{"n":"x"}}]}`, false, "list[0].next.n"},
		{`{"list":{}}`, false, "list"},
		{`{"ptr":[]}`, false, "ptr"},
		{`{"map":{"a":1,"b":"x"}}`, false, "map.?"},
		{`{"multi":[["a"],[1]]}`, false, "multi[1][0]"},
		{`{"s":"a","s":1}`, false, "s"},
		{`{"unknown":[1,{"x":true}]}`, true, ""},
		{`{"union":"text"}`, true, ""},
		{`{"union":[{"type":"t"}]}`, true, ""},
		{`{"union":7}`, false, "union"},
		{`{"union":{"type":"t"}}`, false, "union"},
		{`{"union":[{"type":1}]}`, false, "union[0].type"},
		{`{"union":7,"union":"ok"}`, true, ""},
		{`{"union":"ok","union":7}`, false, "union"},
		{`{"union":[7],"union":null}`, true, ""},
		{`[]`, false, ""},
		{`"x"`, false, ""},
		{``, false, ""},
		{`{`, false, ""},
		{`{"s":"x",}`, false, ""},
		{`{"s":"a` + "\x01" + `"}`, false, ""},
		{`{"s":"\x"}`, false, ""},
		{`{"s":"\u12G4"}`, false, ""},
		{`{"s":"é\"\\\/\b\f\n\r\t\u00e9` + "\xff" + `"}`, true, ""},
		{`{"i":01}`, false, ""},
		{`{"i":-}`, false, ""},
		{`{"f":1.}`, false, ""},
		{`{"f":1e}`, false, ""},
		{`{"b":tru}`, false, ""},
		{`{} {}`, false, ""},
	}
	for _, tt := range tests {
		err := sampleShape.Check([]byte(tt.body))
		require.Equal(t, decodes([]byte(tt.body)), tt.ok, "the oracle disagrees with the table on %q", tt.body)
		if tt.ok {
			assert.NoError(t, err, "Check(%q)", tt.body)
			continue
		}
		require.Error(t, err, "Check(%q)", tt.body)
		var e *jsonwire.Error
		require.ErrorAs(t, err, &e)
		if tt.path != "" {
			assert.Equal(t, tt.path, e.Path, "Check(%q) = %v", tt.body, err)
		}
	}
}

func TestCheckErrorSaysWhereAndWhat(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"list":[{"type":"a"},{"type":7}]}`, "list[1].type (at offset 30): want a string, got a number"},
		{`{"union":{}}`, "union (at offset 9): want a string or an array, got an object"},
		{`{"i8":300}`, "i8 (at offset 6): want an integer that fits in 8 bits, got the number 300"},
		{`{"s":"x"`, "invalid JSON at offset 8: unexpected end of JSON input"},
		{`{"s" "x"}`, "invalid JSON at offset 5: invalid character '\"' after object key"},
	}
	for _, tt := range tests {
		err := sampleShape.Check([]byte(tt.body))
		require.Error(t, err, "Check(%q)", tt.body)
		assert.Equal(t, tt.want, err.Error(), "Check(%q)", tt.body)
	}
}

func TestCheckDepth(t *testing.T) {
	for _, n := range []int{10000, 10001} {
		b := []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
		assert.Equal(t, json.Valid(b), rawShape.Check(b) == nil, "depth %d", n)
	}
}

func TestCheckLongStringWithEscapes(t *testing.T) {
	s := strings.Repeat(`abcdefgh\n\"`, 100000)
	b := []byte(`{"s":"` + s + `"}`)
	require.NoError(t, sampleShape.Check(b))
	bad := []byte(`{"s":"` + s + "\t" + `"}`)
	assert.Error(t, sampleShape.Check(bad), "a raw tab in a string")
}

func TestHookSeesKeptOccurrences(t *testing.T) {
	type item struct {
		Kind    string          `json:"kind"`
		Payload json.RawMessage `json:"payload"`
	}
	numbers := jsonwire.OneOf([]reflect.Type{reflect.TypeFor[[]int]()})
	shape := jsonwire.Of(reflect.TypeFor[[]item](), jsonwire.Hook(reflect.TypeFor[item](), func(o jsonwire.Object) error {
		if o.String("kind") == "numbers" {
			return o.Check("payload", numbers)
		}
		return nil
	}))
	for _, tt := range []struct {
		body string
		ok   bool
	}{
		{`[{"kind":"numbers","payload":[1,2]}]`, true},
		{`[{"payload":["x"],"kind":"numbers"}]`, false},
		{`[{"kind":"text","payload":["x"]}]`, true},
		{`[{"kind":"numbers","kind":null,"payload":["x"]}]`, false},
		{`[{"kind":"numbers","payload":["x"],"payload":null}]`, true},
		{`[{"KIND":"numbers","payload":{}}]`, false},
	} {
		err := shape.Check([]byte(tt.body))
		assert.Equal(t, tt.ok, err == nil, "Check(%q) = %v", tt.body, err)
	}
}

func TestOfRefusesWhatItCannotModel(t *testing.T) {
	type embedded struct{ sample }
	type iface struct {
		V any `json:"v"`
	}
	type stringOpt struct {
		N int `json:"n,string"`
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[embedded](), reflect.TypeFor[iface](), reflect.TypeFor[stringOpt](),
		reflect.TypeFor[[]byte](), reflect.TypeFor[[2]int]()} {
		assert.Panics(t, func() { jsonwire.Of(typ) }, "Of(%s)", typ)
	}
}

// FuzzCheck holds Check to encoding/json: it accepts exactly what
// json.Valid accepts for a raw value, and exactly what Unmarshal decodes
// into a struct of every modelled kind.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{}`, `{"s":"x","list":[{"type":"a","next":{"n":1}}],"union":"u"}`, `{"i":1e2}`,
		`{"map":{"a":1}}`, `[1,"a",null,true,{"x":[]}]`, `{"F":-0.5e-3,"multi":[["a"]]}`, `{"union":[{"type":"x"}],"union":3}`,
		`{"\u0053":"\ud800"}`, `"\u00e9"`, `{"ptr":{"next":{"next":null}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := rawShape.Check(b) == nil, json.Valid(b); got != want {
			t.Fatalf("raw Check(%q) ok = %v, json.Valid = %v", b, got, want)
		}
		err := sampleShape.Check(b)
		if got, want := err == nil, decodes(b); got != want {
			t.Fatalf("Check(%q) = %v, but encoding/json decodes: %v", b, err, want)
		}
	})
}
