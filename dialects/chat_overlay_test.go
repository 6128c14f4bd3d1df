package dialects

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOverlayChat(t *testing.T) {
	full := Sampling{Temperature: chatPtr(0.25), TopP: chatPtr(1.0), MaxTokens: chatPtr(512), Seed: chatPtr(int64(42))}
	tests := []struct {
		name  string
		body  string
		model string
		s     Sampling
		want  string
	}{
		{
			name:  "replaces in place, keeps unknown fields and spacing",
			body:  `{"model": "caller-model", "messages":[{"role":"user","content":"hi","x_extra":true}], "temperature": 1.5, "x_vendor": {"k": [1, 2]}, "max_tokens":10, "seed":1}`,
			model: "run-model",
			s:     full,
			want:  `{"model": "run-model", "messages":[{"role":"user","content":"hi","x_extra":true}], "temperature": 0.25, "x_vendor": {"k": [1, 2]}, "max_tokens":512, "seed":42,"top_p":1}`,
		},
		{
			name:  "keeps max_completion_tokens name",
			body:  `{"model":"a","messages":[],"max_completion_tokens":5}`,
			model: "b",
			s:     Sampling{MaxTokens: chatPtr(99)},
			want:  `{"model":"b","messages":[],"max_completion_tokens":99}`,
		},
		{
			name:  "adds missing fields",
			body:  "{\n  \"messages\": []\n}",
			model: "m",
			s:     Sampling{MaxTokens: chatPtr(3), Temperature: chatPtr(0.0)},
			want:  "{\n  \"messages\": [],\"model\":\"m\",\"temperature\":0,\"max_tokens\":3\n}",
		},
		{
			name:  "empty object",
			body:  `{}`,
			model: "m",
			want:  `{"model":"m"}`,
		},
		{
			name:  "nil sampling leaves caller values",
			body:  `{"model":"a","temperature":0.7,"stream":true,"stream_options":{"include_usage":true}}`,
			model: "b",
			want:  `{"model":"b","temperature":0.7,"stream":true,"stream_options":{"include_usage":true}}`,
		},
		{
			name:  "duplicate key replaced everywhere",
			body:  `{"model":"a","model":"c"}`,
			model: "b",
			want:  `{"model":"b","model":"b"}`,
		},
		{
			name:  "escaped keys and nested model fields untouched",
			body:  `{"meta":{"model":"inner"},"m\u006fdel":"x","tools":[{"function":{"name":"seed"}}]}`,
			model: "b",
			s:     Sampling{Seed: chatPtr(int64(3))},
			want:  `{"meta":{"model":"inner"},"m\u006fdel":"b","tools":[{"function":{"name":"seed"}}],"seed":3}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := OverlayChat([]byte(tt.body), tt.model, tt.s)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got), "OverlayChat(%q)", tt.body)
		})
	}
}

func TestOverlayChatRejects(t *testing.T) {
	for _, body := range []string{``, `[]`, `{"model":`, `{"a":1} {"b":2}`, `"x"`} {
		_, err := OverlayChat([]byte(body), "m", Sampling{})
		assert.Error(t, err, "OverlayChat(%q) = nil error, want one", body)
	}
}

func TestWriteChatError(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteChatError(rec, 401, ErrorTypeInvalidRequest, "invalid_api_key", "Incorrect API key provided.")
	assert.Equal(t, 401, rec.Code)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	assert.JSONEq(t, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, rec.Body.String())
	got := ParseChatError(rec.Code, rec.Body.Bytes())
	assert.Equal(t, &ChatError{Status: 401, Message: "Incorrect API key provided.", Type: ErrorTypeInvalidRequest, Code: "invalid_api_key"}, got)
}

func ExampleOverlayChat() {
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"x_vendor":{"cache":true},"max_completion_tokens":50}`)
	temp, limit := 0.2, 512
	out, err := OverlayChat(body, "run-model", Sampling{Temperature: &temp, MaxTokens: &limit})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out))
	// Output: {"model":"run-model","messages":[{"role":"user","content":"hi"}],"x_vendor":{"cache":true},"max_completion_tokens":512,"temperature":0.2}
}

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
