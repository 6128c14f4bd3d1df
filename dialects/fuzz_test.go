package dialects_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/evalflow/evalflow/dialects"
)

// seedGolden adds every golden capture whose name matches pattern.
func seedGolden(f *testing.F, pattern string) {
	files, err := filepath.Glob(filepath.Join("testdata", "golden", pattern))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"messages":null,"input":{},"system":7}`))
	f.Add([]byte(`not json`))
}

// nativeError checks that an error written for d is d's own JSON shape.
func nativeError(t *testing.T, d dialects.Dialect, err error) {
	rec := httptest.NewRecorder()
	d.WriteError(rec, http.StatusBadRequest, "", err.Error())
	var body struct {
		Type  string `json:"type"`
		Error *struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if e := json.Unmarshal(rec.Body.Bytes(), &body); e != nil || body.Error == nil || body.Error.Type == "" {
		t.Fatalf("%s: error body %q is not in its shape", d.Name(), rec.Body.String())
	}
	if d == dialects.Anthropic && body.Type != "error" {
		t.Fatalf("anthropic error body %q lacks type error", rec.Body.String())
	}
}

// FuzzParseRequest: every dialect's request parser never panics, garbage
// gets a native-shaped error, and whatever parses can be encoded in every
// dialect and parsed back.
func FuzzParseRequest(f *testing.F) {
	seedGolden(f, "*_request.json")
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, d := range dialects.All {
			req, err := d.ParseRequest(body)
			if err != nil {
				nativeError(t, d, err)
				continue
			}
			for _, to := range dialects.All {
				out, err := to.EncodeRequest(req)
				var refused *dialects.FieldError
				if errors.As(err, &refused) {
					continue // a setting the upstream cannot take, refused by name
				}
				if err != nil {
					t.Fatalf("%s → %s: EncodeRequest: %v", d.Name(), to.Name(), err)
				}
				if _, err := to.ParseRequest(out); err != nil {
					t.Fatalf("%s → %s: ParseRequest(EncodeRequest) = %v for %s", d.Name(), to.Name(), err, out)
				}
			}
			if _, err := d.Overlay(body, "m", dialects.Sampling{}); err == nil && !json.Valid(body) {
				t.Fatalf("%s: Overlay accepted invalid JSON %q", d.Name(), body)
			}
		}
	})
}

// FuzzParseResponse: every dialect's response parser never panics, and
// whatever parses can be written for a caller of every dialect, as JSON and
// as a stream, and read back.
func FuzzParseResponse(f *testing.F) {
	seedGolden(f, "*_response.json")
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, d := range dialects.All {
			resp, err := d.ParseResponse(body)
			if err != nil {
				continue
			}
			for _, to := range dialects.All {
				out, err := to.EncodeResponse(resp)
				if err != nil {
					t.Fatalf("%s → %s: EncodeResponse: %v", d.Name(), to.Name(), err)
				}
				if _, err := to.ParseResponse(out); err != nil {
					t.Fatalf("%s → %s: ParseResponse(EncodeResponse) = %v for %s", d.Name(), to.Name(), err, out)
				}
				var sse bytes.Buffer
				if err := to.WriteStream(&sse, resp); err != nil {
					t.Fatalf("%s → %s: WriteStream: %v", d.Name(), to.Name(), err)
				}
				s := to.NewStream()
				for _, line := range bytes.Split(sse.Bytes(), []byte("\n")) {
					if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
						if err := s.Add(data); err != nil {
							t.Fatalf("%s → %s: own stream event %s: %v", d.Name(), to.Name(), data, err)
						}
					}
				}
				if !s.Done() {
					t.Fatalf("%s → %s: own stream not done", d.Name(), to.Name())
				}
			}
		}
	})
}

// FuzzStream: every dialect's stream assembler never panics on any event
// data, in any order.
func FuzzStream(f *testing.F) {
	seedGolden(f, "*_stream.sse")
	f.Fuzz(func(t *testing.T, stream []byte) {
		for _, d := range dialects.All {
			s := d.NewStream()
			for _, line := range bytes.Split(stream, []byte("\n")) {
				if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
					_ = s.Add(data)
				}
			}
			_ = s.Response()
		}
	})
}
