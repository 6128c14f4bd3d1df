package dialects

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/evalflow/evalflow/internal/jsonwire"
	"github.com/stretchr/testify/assert"
)

// requestShapes pairs each dialect with the shape its Overlay checks.
var requestShapes = []struct {
	d     Dialect
	shape *jsonwire.Shape
}{{Chat, chatRequestShape}, {Responses, responsesRequestShape}, {Anthropic, anthropicRequestShape}}

// TestRequestShapeRefusesWhatParseRefuses: bodies of the wrong shape, deep
// inside too, are refused by the shape check as by the parser.
func TestRequestShapeRefusesWhatParseRefuses(t *testing.T) {
	tests := []struct {
		d    Dialect
		body string
		ok   bool
	}{
		{Chat, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, true},
		{Chat, `{"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"u"}}]}]}`, true},
		{Chat, `{"messages":7}`, false},
		{Chat, `{"messages":[7]}`, false},
		{Chat, `{"messages":[{"role":5}]}`, false},
		{Chat, `{"messages":[{"role":"user","content":{"text":"x"}}]}`, false},
		{Chat, `{"messages":[{"role":"user","content":[{"type":"text","text":5}]}]}`, false},
		{Chat, `{"messages":[{"role":"assistant","tool_calls":[{"function":{"arguments":{}}}]}]}`, false},
		{Chat, `{"temperature":"hot"}`, false},
		{Chat, `{"max_tokens":1.5}`, false},
		{Chat, `{"stream":"yes"}`, false},
		{Chat, `{"tool_choice":{"anything":1},"stop":7,"x_unknown":{"a":[1]}}`, true},
		{Responses, `{"input":"hi","instructions":"be brief"}`, true},
		{Responses, `{"input":{"x":1}}`, false},
		{Responses, `{"input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}`, true},
		{Responses, `{"input":[{"role":"user","content":7}]}`, false},
		{Responses, `{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}","content":7}]}`, true},
		{Responses, `{"input":[{"type":"function_call_output","call_id":"c","output":{"x":1}}]}`, false},
		{Responses, `{"input":[{"type":"reasoning","summary":[{"type":"summary_text","text":"t"}],"content":7}]}`, true},
		{Responses, `{"input":[{"type":"reasoning","summary":[],"content":7}]}`, false},
		{Anthropic, `{"max_tokens":10,"system":"s","messages":[{"role":"user","content":"hi"}]}`, true},
		{Anthropic, `{"messages":7}`, false},
		{Anthropic, `{"system":true}`, false},
		{Anthropic, `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":7}]}]}`, false},
		{Anthropic, `{"messages":[{"role":"assistant","content":[{"type":"tool_result","content":7}]}]}`, true},
		{Anthropic, `{"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":1}]}]}`, false},
	}
	for _, tt := range tests {
		shape := chatRequestShape
		for _, rs := range requestShapes {
			if rs.d == tt.d {
				shape = rs.shape
			}
		}
		_, parseErr := tt.d.ParseRequest([]byte(tt.body))
		assert.Equal(t, tt.ok, parseErr == nil, "%s ParseRequest(%s) = %v: the table is wrong", tt.d.Name(), tt.body, parseErr)
		err := shape.Check([]byte(tt.body))
		assert.Equal(t, tt.ok, err == nil, "%s shape Check(%s) = %v", tt.d.Name(), tt.body, err)
		_, err = tt.d.Overlay([]byte(tt.body), "m", Sampling{})
		assert.Equal(t, tt.ok, err == nil, "%s Overlay(%s) = %v", tt.d.Name(), tt.body, err)
	}
}

func TestOverlayErrorSaysWhereAndWhat(t *testing.T) {
	_, err := Anthropic.Overlay([]byte(`{"messages":[{"role":"user","content":[{"type":"tool_result","content":{}}]}]}`), "m", Sampling{})
	assert.EqualError(t, err, "anthropic request: messages[0].content[0].content (at offset 71): want a string or an array, got an object")
}

// FuzzRequestShape holds each request shape to its parser: the shape
// check refuses exactly what ParseRequest refuses, so the relay arm can
// check a request in one pass and leave the parse to whoever reads the
// trace.
func FuzzRequestShape(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "golden", "*_request.json"))
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"input":[{"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"x"}]}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"x"}]}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, rs := range requestShapes {
			_, parseErr := rs.d.ParseRequest(body)
			err := rs.shape.Check(body)
			if (err == nil) != (parseErr == nil) {
				t.Fatalf("%s: shape Check(%q) = %v, ParseRequest = %v", rs.d.Name(), body, err, parseErr)
			}
		}
	})
}

// benchRequest is a chat request of about size bytes: a system prompt, a
// tool call and its result, and a user message carrying the rest.
func benchRequest(size int) []byte {
	head := `{"model":"caller","temperature":0.7,"messages":[{"role":"system","content":"You are a careful assistant.\nAnswer briefly."},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"calc","arguments":"{\"x\":\"2+2\"}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"4"},{"role":"user","content":"`
	tail := `"}],"tools":[{"type":"function","function":{"name":"calc","parameters":{"type":"object"}}}]}`
	pad := make([]byte, max(size-len(head)-len(tail), 1))
	for i := range pad {
		pad[i] = "abcdefgh ijklmnop qrstuvwxyz.\n"[i%30]
		if pad[i] == '\n' {
			pad[i] = ' '
		}
	}
	return []byte(head + string(pad) + tail)
}

// BenchmarkRequestCheck compares, per request body, the relay arm's one
// pass (the shape check inside Overlay) with the typed parse the trace
// does later, and with encoding/json's validity check alone.
func BenchmarkRequestCheck(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"4KB", 4 << 10}, {"1MB", 1 << 20}} {
		body := benchRequest(size.n)
		b.Run("check/"+size.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if err := chatRequestShape.Check(body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("overlay/"+size.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := Chat.Overlay(body, "m", Sampling{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("json.Valid/"+size.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if !json.Valid(body) {
					b.Fatal("invalid")
				}
			}
		})
		b.Run("parse/"+size.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := Chat.ParseRequest(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
