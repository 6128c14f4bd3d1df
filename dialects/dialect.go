package dialects

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Dialect is one wire format: its route, its auth carrier, its codec between
// the wire and the typed vocabulary, and its error shape. Chat, Responses and
// Anthropic are the implementations.
type Dialect interface {
	// Name is how traces and configuration name the dialect: chat, responses, anthropic.
	Name() string
	// Path is the model route below /v1, e.g. "/chat/completions".
	Path() string
	// Secret is the API key a caller presented in this dialect's carrier
	// (Bearer or x-api-key), falling back to the other one.
	Secret(h http.Header) string

	// ParseRequest reads a request body.
	ParseRequest(body []byte) (Request, error)
	// ParseResponse reads a non-streaming response body.
	ParseResponse(body []byte) (Response, error)
	// NewStream returns an assembler of a streamed response, fed one SSE
	// event's data at a time.
	NewStream() Stream
	// ParseError reads an error body in this dialect's shape.
	ParseError(status int, body []byte) error

	// Overlay checks body (valid JSON of the shape ParseRequest reads: what
	// ParseRequest refuses, Overlay refuses) and sets model and the sampling
	// fields s sets, in this dialect's field names, keeping every other
	// byte of body where it is.
	Overlay(body []byte, model string, s Sampling) (Body, error)
	// EncodeRequest writes a request for an upstream of this dialect.
	EncodeRequest(req Request) ([]byte, error)
	// EncodeResponse writes a non-streaming response for a caller.
	EncodeResponse(resp Response) ([]byte, error)
	// WriteStream writes resp as a complete, valid SSE sequence, text and
	// tool-call arguments split over several events. w is flushed per event
	// when it is an http.Flusher.
	WriteStream(w io.Writer, resp Response) error
	// StreamError is an SSE event reporting an error inside a stream.
	StreamError(message string) []byte
	// WriteError answers with an error in this dialect's shape; code is
	// OpenAI's machine-readable code, when there is one.
	WriteError(w http.ResponseWriter, status int, code, message string)
}

// Stream assembles a streamed response.
type Stream interface {
	// Add consumes one SSE event's data. An error event of the stream is
	// returned as an error.
	Add(data []byte) error
	// Response returns what was assembled so far.
	Response() Response
	// Done reports whether the stream's terminal event was seen.
	Done() bool
}

// Dialect names, as traces and configuration spell them.
const (
	NameChat      = "chat"
	NameResponses = "responses"
	NameAnthropic = "anthropic"
)

// The dialects, by value.
var (
	Chat      Dialect = chatDialect{}
	Responses Dialect = responsesDialect{}
	Anthropic Dialect = anthropicDialect{}
)

// All lists every dialect.
var All = []Dialect{Chat, Responses, Anthropic}

// ByName returns the dialect called name; "" is chat.
func ByName(name string) (Dialect, error) {
	if name == "" {
		return Chat, nil
	}
	for _, d := range All {
		if d.Name() == name {
			return d, nil
		}
	}
	return nil, fmt.Errorf("unknown dialect %q (want chat, responses or anthropic)", name)
}

// bearer reads Authorization: Bearer.
func bearer(h http.Header) string {
	if v := h.Get("Authorization"); len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return ""
}

// sse writes Server-Sent Events, flushing after each.
type sse struct {
	w   io.Writer
	err error
}

// event writes one event; a non-empty name adds an event: line. After a
// failed write it does nothing.
func (s *sse) event(name string, v any) {
	if s.err != nil {
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		s.err = fmt.Errorf("encode event: %w", err)
		return
	}
	s.raw(name, data)
}

func (s *sse) raw(name string, data []byte) {
	if s.err != nil {
		return
	}
	var b []byte
	if name != "" {
		b = append(b, "event: "+name+"\n"...)
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	if _, err := s.w.Write(b); err != nil {
		s.err = fmt.Errorf("write event: %w", err)
		return
	}
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// pieces cuts s into at most n pieces of about equal size, on rune
// boundaries; "" gives none.
func pieces(s string, n int) []string {
	if s == "" {
		return nil
	}
	rs := []rune(s)
	size := (len(rs) + n - 1) / n
	var out []string
	for len(rs) > 0 {
		k := min(size, len(rs))
		out = append(out, string(rs[:k]))
		rs = rs[k:]
	}
	return out
}

// errorType is the error type both families use for a status.
func errorType(status int, anthropic bool) string {
	switch {
	case status == http.StatusUnauthorized:
		if anthropic {
			return "authentication_error"
		}
		return ErrorTypeInvalidRequest
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound && anthropic:
		return "not_found_error"
	case status == http.StatusRequestEntityTooLarge && anthropic:
		return "request_too_large"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == 529:
		return "overloaded_error"
	case status >= 500:
		if anthropic {
			return "api_error"
		}
		return ErrorTypeServer
	}
	return ErrorTypeInvalidRequest
}

// textOf joins the text parts of parts.
func textOf(parts []Part) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Type == PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// joinReasoning joins the text of thinking blocks.
func joinReasoning(ts []Thinking) string {
	var b strings.Builder
	for _, t := range ts {
		b.WriteString(t.Text)
	}
	return b.String()
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

// dataURL splits a data: URL into media type and base64 data.
func dataURL(u string) (mediaType, data string, ok bool) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return "", "", false
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return "", "", false
	}
	mediaType, isBase64 := strings.CutSuffix(meta, ";base64")
	if !isBase64 {
		return "", "", false
	}
	return mediaType, data, true
}
