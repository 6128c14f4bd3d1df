package jsonwire

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The decode targets are shaped like the documents of the wire: a chat
// request and answer, their parts, and a tree that refers to itself. They
// use every kind fastDecode plans for, and a map it leaves to v1 mode.
type (
	request struct {
		Model      string          `json:"model"`
		Messages   []message       `json:"messages"`
		Tools      []tool          `json:"tools"`
		ToolChoice json.RawMessage `json:"tool_choice"`
		Stream     bool            `json:"stream,omitempty"`
	}
	// sampling takes the same documents as request: a pointer to every
	// number kind and a bool, where a null keeps the value and an integer
	// must be integral; Stop, untagged, matches its key only by case,
	// which fastDecode leaves to v1 mode.
	sampling struct {
		Temperature       *float64 `json:"temperature"`
		TopP              *float64 `json:"top_p,omitzero"`
		Seed              *int64   `json:"seed,omitempty"`
		MaxTokens         *int     `json:"max_tokens,omitempty"`
		ParallelToolCalls *bool    `json:"parallel_tool_calls"`
		Stop              json.RawMessage
		Ignored           string `json:"-"`
	}
	message struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		ToolCalls []call          `json:"tool_calls,omitempty"`
	}
	call struct {
		ID       string    `json:"id"`
		Function *function `json:"function"`
	}
	function struct {
		Name       string          `json:"name"`
		Arguments  string          `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
	}
	tool struct {
		Type     string   `json:"type"`
		Function function `json:"function"`
	}
	part struct {
		Type     string `json:"type"`
		Text     string `json:"text,omitempty"`
		ImageURL *struct {
			URL string `json:"url"`
		} `json:"image_url,omitempty"`
	}
	response struct {
		ID      string   `json:"id"`
		Created int64    `json:"created"`
		Choices []choice `json:"choices"`
		Usage   *usage   `json:"usage,omitempty"`
	}
	usage struct {
		Prompt     int `json:"prompt_tokens"`
		Completion int `json:"completion_tokens"`
		Details    *struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details,omitempty"`
	}
	choice struct {
		Index        int     `json:"index"`
		Message      message `json:"message"`
		FinishReason string  `json:"finish_reason"`
	}
	node struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Children []node `json:"children"`
		Next     *node  `json:"next"`
	}
)

// decodeTargets are the types documents are decoded into, as pointers to
// their zero values.
var decodeTargets = []any{new(request), new(sampling), new(response), new([]part), new([]string), new(string), new(node), new([]message), new(map[string]any)}

// zeroOf returns a new pointer to the zero value target points to.
func zeroOf(target any) any { return reflect.New(reflect.TypeOf(target).Elem()).Interface() }

// sameAsV1 checks that Unmarshal and UnmarshalOwned decode data into
// every target as encoding/json v2's v1 mode does: the same value, and
// the same error or none.
func sameAsV1(t *testing.T, data []byte) {
	for _, target := range decodeTargets {
		name := reflect.TypeOf(target).Elem().String()
		want := zeroOf(target)
		wantErr := jsonv1.Unmarshal(data, want)
		for _, f := range []struct {
			name string
			fn   func([]byte, any) error
		}{{"Unmarshal", Unmarshal}, {"UnmarshalOwned", UnmarshalOwned}} {
			got := zeroOf(target)
			gotErr := f.fn(slices.Clone(data), got)
			if wantErr == nil {
				require.NoError(t, gotErr, "%s(%q) into %s", f.name, data, name)
			} else {
				require.EqualError(t, gotErr, wantErr.Error(), "%s(%q) into %s", f.name, data, name)
			}
			require.True(t, reflect.DeepEqual(want, got), "%s(%q) into %s = %#v, want %#v", f.name, data, name, got, want)
		}
	}
}

// UnmarshalOwned shares the memory of long strings and raw values with
// the document, and copies short ones, so that an id does not keep a
// whole answer alive.
func TestUnmarshalOwnedSharesLongValues(t *testing.T) {
	long := strings.Repeat("x", shareMin)
	doc := []byte(`{"id":"short","choices":[{"index":0,"message":{"role":"assistant","content":"` + long + `"},"finish_reason":"stop"}]}`)
	inDoc := func(p *byte) bool {
		a := uintptr(unsafe.Pointer(p))
		return a >= uintptr(unsafe.Pointer(&doc[0])) && a < uintptr(unsafe.Pointer(&doc[len(doc)-1]))
	}
	var cr response
	require.NoError(t, UnmarshalOwned(doc, &cr))
	require.Len(t, cr.Choices, 1)
	assert.True(t, inDoc(&cr.Choices[0].Message.Content[0]), "a long raw value is shared")
	assert.False(t, inDoc(unsafe.StringData(cr.ID)), "a short string is copied")
	var s string
	require.NoError(t, UnmarshalOwned([]byte(`"`+long+`"`), &s))
	assert.Equal(t, long, s)

	var copied response
	require.NoError(t, Unmarshal(doc, &copied))
	assert.False(t, inDoc(&copied.Choices[0].Message.Content[0]), "Unmarshal copies")
}

func TestUnquote(t *testing.T) {
	tests := []struct{ raw, want string }{
		{`""`, ""},
		{`"plain text"`, "plain text"},
		{`"tab\tand \"quote\""`, "tab\tand \"quote\""},
		{`"\u00e9t\u00e9"`, "été"},
		{`"été"`, "été"},
		{"\"bad \xff utf8\"", "bad \uFFFD utf8"},
	}
	for _, tt := range tests {
		got, err := Unquote([]byte(tt.raw))
		require.NoError(t, err, "Unquote(%q)", tt.raw)
		assert.Equal(t, tt.want, got, "Unquote(%q)", tt.raw)
		owned, err := UnquoteOwned([]byte(tt.raw))
		require.NoError(t, err, "UnquoteOwned(%q)", tt.raw)
		assert.Equal(t, tt.want, owned, "UnquoteOwned(%q)", tt.raw)
	}
}

// Strings with newlines and quotes, the common escapes, are decoded in the
// one pass; \u escapes go to v1 mode's rules.
func TestUnescape(t *testing.T) {
	for raw, want := range map[string]string{
		`a\nb\"c\\d\/e\tf\rg\bh\fi`: "a\nb\"c\\d/e\tf\rg\bh\fi",
		`plain`:                     "plain",
		`\n`:                        "\n",
	} {
		got, ok := unescape([]byte(raw))
		require.True(t, ok, raw)
		assert.Equal(t, want, got, raw)
	}
	_, ok := unescape([]byte(`\u00e9`))
	assert.False(t, ok)
}

// unmarshalCases are documents where the one-pass decode and v1 mode could
// part: each must decode alike.
var unmarshalCases = []string{
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.5,"seed":3,"max_tokens":16,"stream":true}`,
	`{"model":"m","messages":[{"role":"user","content":"line\nbreak \"quoted\" \u00e9 \ud83d\ude00 \ud800 x"}]}`,
	`{"MODEL":"a","model":"b"}`,       // a key matching by case
	`{"model":"a","model":"b"}`,       // a repeated field
	`{"max_tokens":1,"max_Tokens":2}`, // repeated through case
	`{"model":7}`,                     // a type error: v1 keeps decoding past it
	`{"messages":[{"role":1},{"role":"user","content":"ok"}],"model":"m"}`,
	`{"model":"m","messages":[]}`, // empty, not nil
	`{"model":"m","messages":null,"temperature":null,"model":null}`,
	`{"model":"m"} trailing`,
	`{"model":"m",`,
	`{"max_tokens":1e400}`,
	`{"max_tokens":1.0}`,
	`{"max_tokens":99999999999999999999}`,
	`{"temperature":-0,"top_p":1E-3,"seed":-12}`,
	`{"temperature":01}`,
	`{"temperature":1.}`,
	"{\"model\":\"bad \xff utf8\"}",
	"{\"model\":\"ctl \x01\"}",
	`{"model":"bad \x escape"}`,
	`{"unknown":{"deep":[1,2,{"x":null}],"s":"\"}"},"model":"m"}`,
	`{"tool_choice":{"type":"function","function":{"name":"f"}},"stop":["a","b"],"parallel_tool_calls":false}`,
	`{"tool_choice":null,"stop":null}`,
	`{"m\u006fdel":"escaped key"}`,
	`{"modèl":"non-ASCII key"}`,
	`{"ſtream":true}`,
	` {"model" : "spaced" , "messages" : [ ] } `,
	`{"choices":[{"index":0,"message":{"role":"assistant","content":"x","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"completion_tokens_details":{"reasoning_tokens":1}}}`,
	`["a",2,"c"]`,
	`["a","b"]`,
	`[]`,
	`null`,
	`"a \u00e9 string"`,
	`"plain"`,
	`{}`,
	``,
	`{"model":"m"}{}`,
	`[{"type":"text","text":"t"},{"type":"image_url","image_url":{"url":"u"}},{"type":"image_url","image_url":null}]`,
	strings.Repeat(`[`, 600) + strings.Repeat(`]`, 600),
	`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("long ", 80) + `"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("long\n\"line\" ", 40) + `"}]}`,
	`{"model":"` + strings.Repeat("é", 200) + `","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","description":"` + strings.Repeat("d", 300) + `"}}}]}`,
}

func TestUnmarshalSameAsV1(t *testing.T) {
	for _, doc := range unmarshalCases {
		sameAsV1(t, []byte(doc))
	}
}

// The common documents take the one pass, not the fallback.
func TestFastDecodeTakesCommonDocuments(t *testing.T) {
	var req request
	require.True(t, fastDecode([]byte(`{"model":"m","messages":[{"role":"user","content":"hi\nthere"}],"temperature":0.5,"stream":false}`), &req))
	assert.Equal(t, "m", req.Model)
	var resp response
	require.True(t, fastDecode([]byte(`{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`), &resp))
	require.Len(t, resp.Choices, 1)
	assert.Equal(t, `"ok"`, string(resp.Choices[0].Message.Content))
	assert.False(t, fastDecode([]byte(`{"Model":"m"}`), new(request)), "a key matching by case must go to v1 mode")
}

// FuzzUnmarshal holds fastDecode to v1 mode: whatever the document, both
// give the same value and the same error.
func FuzzUnmarshal(f *testing.F) {
	for _, doc := range unmarshalCases {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) { sameAsV1(t, data) })
}
