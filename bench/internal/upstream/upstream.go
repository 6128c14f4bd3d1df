// Package upstream is the mock model the benchmarks measure against: it
// answers OpenAI chat completions, OpenAI Responses and Anthropic Messages
// with a configurable latency, body size, and SSE event count and spacing.
// Answers are built once, so the mock costs next to nothing per request.
//
// Every streamed content event carries a marker "@@<seq>:<unix-nanos>@@"
// holding its sequence number and the time the mock wrote it, so a client
// can tell a lost, merged or delayed event (see Marker).
package upstream

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Dialect routes, below /v1.
const (
	PathChat      = "/v1/chat/completions"
	PathResponses = "/v1/responses"
	PathMessages  = "/v1/messages"
)

// Config shapes the mock's answers. The zero value answers at once with a
// small body and, when asked to stream, 16 events back to back.
type Config struct {
	// Latency is how long the mock waits before the response headers.
	Latency time.Duration
	// BodyBytes is the approximate size of a non-streaming answer; the
	// assistant text is padded to reach it.
	BodyBytes int
	// Events is how many content events a stream carries (16 when 0).
	Events int
	// Gap is the time between two content events.
	Gap time.Duration
}

// Server is the mock model, an http.Handler.
type Server struct {
	cfg  Config
	json map[string][]byte
}

var _ http.Handler = (*Server)(nil)

// New returns a mock answering as cfg says.
func New(cfg Config) *Server {
	if cfg.Events <= 0 {
		cfg.Events = 16
	}
	pad := strings.Repeat("x", max(cfg.BodyBytes-300, 1))
	return &Server{cfg: cfg, json: map[string][]byte{
		PathChat: []byte(`{"id":"chatcmpl-bench","object":"chat.completion","created":1,"model":"bench",` +
			`"choices":[{"index":0,"message":{"role":"assistant","content":"` + pad + `"},"finish_reason":"stop"}],` +
			`"usage":{"prompt_tokens":10,"completion_tokens":10,"total_tokens":20}}`),
		PathResponses: []byte(`{"id":"resp_bench","object":"response","created_at":1,"status":"completed","model":"bench",` +
			`"output":[{"type":"message","id":"msg_bench","status":"completed","role":"assistant",` +
			`"content":[{"type":"output_text","text":"` + pad + `","annotations":[]}]}],` +
			`"usage":{"input_tokens":10,"output_tokens":10,"total_tokens":20}}`),
		PathMessages: []byte(`{"id":"msg_bench","type":"message","role":"assistant","model":"bench",` +
			`"content":[{"type":"text","text":"` + pad + `"}],"stop_reason":"end_turn","stop_sequence":null,` +
			`"usage":{"input_tokens":10,"output_tokens":10}}`),
	}}
}

// ServeHTTP answers a model call of any of the three dialects.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, ok := s.json[r.URL.Path]
	if !ok || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	req, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	if s.cfg.Latency > 0 {
		time.Sleep(s.cfg.Latency) // the modelled latency, not synchronization
	}
	if isStream(req) {
		s.stream(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// isStream finds "stream": true without decoding the whole body.
func isStream(body []byte) bool {
	i := bytes.Index(body, []byte(`"stream"`))
	if i < 0 {
		return false
	}
	rest := bytes.TrimLeft(body[i+len(`"stream"`):], " \t\r\n:")
	return bytes.HasPrefix(rest, []byte("true"))
}

// frames are a stream's fixed events around the content events, and the
// content event split at the marker.
type frames struct {
	head          []string
	before, after string
	tail          []string
}

var streams = map[string]frames{
	PathChat: {
		before: `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"bench","choices":[{"index":0,"delta":{"role":"assistant","content":"`,
		after:  `"},"finish_reason":null}]}` + "\n\n",
		tail: []string{
			`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"bench","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":10,"total_tokens":20}}` + "\n\n",
			"data: [DONE]\n\n",
		},
	},
	PathResponses: {
		head: []string{
			"event: response.created\ndata: " + `{"type":"response.created","sequence_number":0,"response":{"id":"resp_bench","object":"response","created_at":1,"status":"in_progress","model":"bench","output":[]}}` + "\n\n",
			"event: response.output_item.added\ndata: " + `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"msg_bench","status":"in_progress","role":"assistant","content":[]}}` + "\n\n",
		},
		before: "event: response.output_text.delta\ndata: " + `{"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_bench","output_index":0,"content_index":0,"delta":"`,
		after:  `"}` + "\n\n",
		tail: []string{
			"event: response.completed\ndata: " + `{"type":"response.completed","sequence_number":3,"response":{"id":"resp_bench","object":"response","created_at":1,"status":"completed","model":"bench","output":[{"type":"message","id":"msg_bench","status":"completed","role":"assistant","content":[{"type":"output_text","text":"done","annotations":[]}]}],"usage":{"input_tokens":10,"output_tokens":10,"total_tokens":20}}}` + "\n\n",
		},
	},
	PathMessages: {
		head: []string{
			"event: message_start\ndata: " + `{"type":"message_start","message":{"id":"msg_bench","type":"message","role":"assistant","model":"bench","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}` + "\n\n",
			"event: content_block_start\ndata: " + `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n",
		},
		before: "event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`,
		after:  `"}}` + "\n\n",
		tail: []string{
			"event: content_block_stop\ndata: " + `{"type":"content_block_stop","index":0}` + "\n\n",
			"event: message_delta\ndata: " + `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":10}}` + "\n\n",
			"event: message_stop\ndata: " + `{"type":"message_stop"}` + "\n\n",
		},
	},
}

// stream writes the head events, Events content events Gap apart, and the
// tail events, flushing each.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	f := streams[r.URL.Path]
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	write := func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	for _, h := range f.head {
		if !write([]byte(h)) {
			return
		}
	}
	buf := make([]byte, 0, len(f.before)+len(f.after)+48)
	var t *time.Timer
	for i := range s.cfg.Events {
		if i > 0 && s.cfg.Gap > 0 {
			if t == nil {
				t = time.NewTimer(s.cfg.Gap)
				defer t.Stop()
			} else {
				t.Reset(s.cfg.Gap)
			}
			select {
			case <-t.C:
			case <-r.Context().Done():
				return
			}
		}
		buf = append(buf[:0], f.before...)
		buf = AppendMarker(buf, i, time.Now())
		buf = append(buf, f.after...)
		if !write(buf) {
			return
		}
	}
	for _, tl := range f.tail {
		if !write([]byte(tl)) {
			return
		}
	}
}

// AppendMarker appends the marker of content event seq written at t.
func AppendMarker(b []byte, seq int, t time.Time) []byte {
	b = append(b, "@@"...)
	b = strconv.AppendInt(b, int64(seq), 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, t.UnixNano(), 10)
	return append(b, "@@"...)
}

// Marker finds the first marker in b: the event's sequence number and when
// the mock wrote it. ok is false when b holds none.
func Marker(b []byte) (seq int, sent time.Time, ok bool) {
	i := bytes.Index(b, []byte("@@"))
	if i < 0 {
		return 0, time.Time{}, false
	}
	rest := b[i+2:]
	j := bytes.Index(rest, []byte("@@"))
	if j < 0 {
		return 0, time.Time{}, false
	}
	a, c, found := bytes.Cut(rest[:j], []byte(":"))
	if !found {
		return 0, time.Time{}, false
	}
	n, err1 := strconv.Atoi(string(a))
	ns, err2 := strconv.ParseInt(string(c), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, time.Time{}, false
	}
	return n, time.Unix(0, ns), true
}

// IdleTimeout is how long the servers Listen starts keep an idle
// keep-alive connection. Every client of them (the load generator, the
// reverse proxy's transport, the providers' transports) drops its own idle
// connections sooner (90 s), so a server never closes a connection a
// client is about to reuse. Without it net/http would use the
// ReadHeaderTimeout (10 s): on a loaded machine, a pause of 10 s between a
// target's calls let the mock close the reverse proxy's idle connection
// just as the proxy sent the next request on it, and the proxy, whose
// request body is the caller's stream and cannot be sent again, failed the
// call ("write: broken pipe", "use of closed network connection").
const IdleTimeout = 2 * time.Minute

// Listen serves h on a free loopback port, speaking HTTP/1.1 and, when h2c,
// unencrypted HTTP/2 too. It returns the base URL (without /v1) and a
// function that closes the server.
func Listen(h http.Handler, h2c bool) (string, func() error, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: IdleTimeout}
	if h2c {
		var p http.Protocols
		p.SetHTTP1(true)
		p.SetUnencryptedHTTP2(true)
		srv.Protocols = &p
	}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), srv.Close, nil
}
