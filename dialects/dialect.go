package dialects

import (
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Dialect is one wire format: how its calls arrive and how the server
// answers on its own (Wire), and its codec between the wire and the typed
// vocabulary (Codec). Chat, Responses and Anthropic are the
// implementations.
type Dialect interface {
	Wire
	Codec
}

// Wire is what a dialect's callers see of the server itself: the route,
// where the secret is carried, and the shape of the errors and of the
// model list the server answers with.
type Wire interface {
	// Name is how traces and configuration name the dialect: chat, responses, anthropic.
	Name() string
	// Path is the model route below /v1, e.g. "/chat/completions".
	Path() string
	// Secret is the API key a caller presented in this dialect's carrier
	// (Bearer or x-api-key), falling back to the other one.
	Secret(h http.Header) string
	// WriteError answers with an error in this dialect's shape; code is
	// OpenAI's machine-readable code, when there is one.
	WriteError(w http.ResponseWriter, status int, code, message string)
	// StreamError is an SSE event reporting an error inside a stream.
	StreamError(message string) []byte
	// WriteModels answers with a list of the models named ids, in the shape
	// of this dialect's family (OpenAI's or Anthropic's).
	WriteModels(w http.ResponseWriter, ids []string)
	// WriteModel answers with the model named id, in the shape of this
	// dialect's family.
	WriteModel(w http.ResponseWriter, id string)
}

// Codec reads and writes a dialect's bodies: requests, responses, streams
// and upstream errors, to and from the typed vocabulary.
type Codec interface {
	// ParseRequest reads a request body. The request's long strings may
	// share body's memory: body must not change afterwards.
	ParseRequest(body []byte) (Request, error)
	// Overlay checks body (valid JSON of the shape ParseRequest reads: what
	// ParseRequest refuses, Overlay refuses) and sets model and the sampling
	// fields s sets, in this dialect's field names, keeping every other
	// byte of body where it is.
	Overlay(body []byte, model string, s Sampling) (Body, error)
	// EncodeRequest writes a request for an upstream of this dialect.
	EncodeRequest(req Request) ([]byte, error)

	// ParseResponse reads a non-streaming response body. Like
	// ParseRequest's, its long strings may share body's memory.
	ParseResponse(body []byte) (Response, error)
	// EncodeResponse writes a non-streaming response for a caller.
	EncodeResponse(resp Response) ([]byte, error)

	// NewStream returns an assembler of a streamed response, fed one SSE
	// event's data at a time.
	NewStream() Stream
	// NewStreamWriter returns a writer of a streamed answer to w in this
	// dialect's events, fed one Event at a time: the translate arm's way
	// of answering a streaming caller while the upstream streams.
	NewStreamWriter(w io.Writer) StreamWriter
	// WriteStream writes resp as a complete, valid SSE sequence, text and
	// tool-call arguments split over several events, through the dialect's
	// StreamWriter (EventsOf). w is flushed per event when it is an
	// http.Flusher.
	WriteStream(w io.Writer, resp Response) error

	// ParseError reads an error body in this dialect's shape.
	ParseError(status int, body []byte) error
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
	// Events is what the last Add made known, in dialect-neutral form
	// (EventStart through EventToolArgs: the stream's reader sends
	// EventFinish itself, at Done). It is valid until the next Add.
	Events() []Event
}

// Dialect names, as traces and configuration spell them.
const (
	NameChat      = "chat"
	NameResponses = "responses"
	NameAnthropic = "anthropic"
	NameGemini    = "gemini"
)

// The dialects, by value.
var (
	Chat      Dialect = chatDialect{}
	Responses Dialect = responsesDialect{}
	Anthropic Dialect = anthropicDialect{}
	// Gemini is Google's Gemini API (generateContent). Its codec is
	// complete; the interception server does not route it yet, so it is
	// not in All.
	Gemini Dialect = geminiDialect{}
)

// All lists every dialect the interception server routes.
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

// chatDialect is OpenAI chat completions.
type chatDialect struct{}

func (chatDialect) Name() string { return NameChat }

func (chatDialect) Path() string { return "/chat/completions" }

func (chatDialect) Secret(h http.Header) string {
	if s := bearer(h); s != "" {
		return s
	}
	return h.Get("X-Api-Key")
}

// responsesDialect is the OpenAI Responses API.
type responsesDialect struct{}

func (responsesDialect) Name() string { return NameResponses }

func (responsesDialect) Path() string { return "/responses" }

func (responsesDialect) Secret(h http.Header) string { return chatDialect{}.Secret(h) }

// anthropicDialect is Anthropic Messages.
type anthropicDialect struct{}

func (anthropicDialect) Name() string { return NameAnthropic }

func (anthropicDialect) Path() string { return "/messages" }

func (anthropicDialect) Secret(h http.Header) string {
	if s := h.Get("X-Api-Key"); s != "" {
		return s
	}
	return bearer(h)
}

// bearer reads Authorization: Bearer.
func bearer(h http.Header) string {
	if v := h.Get("Authorization"); len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return ""
}
