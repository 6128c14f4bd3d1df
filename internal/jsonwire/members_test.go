package jsonwire

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRemove takes members out of objects written every way, and the
// result is the object as written without them.
func TestRemove(t *testing.T) {
	tests := []struct {
		body string
		drop []string
		want string
	}{
		{`{"a":1,"b":2,"c":3}`, []string{"b"}, `{"a":1,"c":3}`},
		{`{"a":1,"b":2,"c":3}`, []string{"a"}, `{"b":2,"c":3}`},
		{`{"a":1,"b":2,"c":3}`, []string{"c"}, `{"a":1,"b":2}`},
		{`{"a":1,"b":2,"c":3}`, []string{"a", "b"}, `{"c":3}`},
		{`{"a":1,"b":2,"c":3}`, []string{"a", "c"}, `{"b":2}`},
		{`{"a":1,"b":2,"c":3}`, []string{"b", "c"}, `{"a":1}`},
		{`{"a":1,"b":2,"c":3}`, []string{"a", "b", "c"}, `{}`},
		{`{"a": 1, "b": [1, {"x": "}"}], "c": 3}`, []string{"b"}, `{"a": 1, "c": 3}`},
		{`{"a": 1, "b": 2}`, []string{"a"}, `{"b": 2}`},
		{`{"b\u0041":true,"a":{"bA":1}}`, []string{"bA"}, `{"a":{"bA":1}}`},
		{`{"a":1,"a":2,"b":3}`, []string{"a"}, `{"b":3}`},
		{`{}`, []string{"a"}, `{}`},
	}
	for _, tt := range tests {
		b := []byte(tt.body)
		require.True(t, json.Valid(b), tt.body)
		ms, err := Members(b, 0)
		require.NoError(t, err, "Members(%q)", tt.body)
		got := Apply(b, Remove(ms, func(m Member) bool { return slices.Contains(tt.drop, m.Key) }))
		assert.Equal(t, tt.want, string(got), "Remove(%q, %q)", tt.body, tt.drop)
		assert.Equal(t, tt.body, string(b), "the document is not changed")
	}
}

// TestElements finds each element of an array, nested values whole.
func TestElements(t *testing.T) {
	b := []byte(` [1, "a,]", {"k":[2,3]} ,null]`)
	es, err := Elements(b, 0)
	require.NoError(t, err)
	var got []string
	for _, e := range es {
		got = append(got, string(b[e.Start:e.End]))
	}
	assert.Equal(t, []string{`1`, `"a,]"`, `{"k":[2,3]}`, `null`}, got)
	es, err = Elements([]byte(`[ ]`), 0)
	require.NoError(t, err)
	assert.Empty(t, es)
	_, err = Elements([]byte(`{}`), 0)
	assert.Error(t, err)
	_, err = Members([]byte(`[]`), 0)
	assert.Error(t, err)
}
