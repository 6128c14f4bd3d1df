package interception

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/trace"
)

// statusClientClosed records a call whose harness went away before an answer;
// no status reached it (nginx's convention).
const statusClientClosed = 499

// model serves a model call of dialect d: it records the turn and relays the
// call when the upstream speaks d, translates it otherwise.
func (s *Server) model(w http.ResponseWriter, r *http.Request, e *entry, d dialects.Dialect) {
	start := time.Now()
	turn := trace.Turn{Dialect: d.Name(), Route: r.URL.Path, StartedAt: start}
	index := e.begin()
	delivered := false
	var raw *rawTurn // the relay arm's turn, parsed when read (record.go)
	defer func() {
		turn.Latency = time.Since(start)
		e.record(index, turn, raw, delivered)
		if s.cfg.OnTurn != nil {
			turn = e.turn(index)
			s.cfg.OnTurn(e.rollout.Key, turn)
		}
		s.cfg.Logger.Debug("model call", "rollout", e.rollout.Key, "route", turn.Route,
			"status", turn.Status, "attempts", turn.Attempts, "latency", turn.Latency, "error", turn.Error)
	}()
	fail := func(status int, code, msg string) {
		turn.Status, turn.Error = status, msg
		d.WriteError(w, status, code, msg)
	}

	body, ok := s.readBody(w, r, fail)
	if !ok {
		return
	}
	if up := s.up; up.Name() != d.Name() {
		req, err := d.ParseRequest(body)
		if err != nil {
			fail(http.StatusBadRequest, "", "We could not parse the JSON body of your request: "+err.Error())
			return
		}
		turn.Request = overlaid(req, e.rollout)
		turn.Streamed = req.Stream
		s.translate(w, r, e, d, up, &turn, fail)
		return
	}
	// The overlay checks the body's syntax and shape; the typed parse waits
	// until the turn is read.
	out, err := d.Overlay(body, e.rollout.Model, e.rollout.Sampling)
	if err != nil {
		fail(http.StatusBadRequest, "", "We could not parse the JSON body of your request: "+err.Error())
		return
	}
	raw = &rawTurn{dialect: d, request: body}
	resp, ok := s.send(w, r, e, &turn, d.Path(), r.Header, out, fail)
	if !ok {
		return
	}
	defer resp.Body.Close()
	turn.Status = resp.StatusCode

	copyHeaders(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	upstream := &firstByteReader{r: resp.Body, start: start}

	var relayErr error
	if isEventStream(resp.Header.Get("Content-Type")) {
		turn.Streamed = true // until the request is parsed
		stream := d.NewStream()
		relayErr = relaySSE(w, upstream, func(data []byte) bool {
			if err := stream.Add(data); err != nil && turn.Error == "" {
				turn.Error = err.Error()
			}
			if stream.Done() && !delivered {
				e.deliver()
				delivered = true
			}
			return stream.Done()
		})
		turn.Response = stream.Response()
		ended := stream.Done() || turn.Response.FinishReason != ""
		if relayErr == nil && !ended && turn.Error == "" && resp.StatusCode/100 == 2 {
			relayErr = &upstreamReadError{errors.New("stream ended before its last event")}
		}
	} else {
		var tee bytes.Buffer
		if n := resp.ContentLength; n > 0 && n <= s.cfg.MaxBodyBytes {
			tee.Grow(int(n))
		}
		_, relayErr = io.Copy(w, io.TeeReader(upstream, &tee))
		if relayErr == nil {
			// The caller has the whole answer before the turn is recorded;
			// Turns and Finish wait for it.
			e.deliver()
			delivered = true
			_ = http.NewResponseController(w).Flush()
			raw.answered, raw.status, raw.answer = true, resp.StatusCode, tee.Bytes()
		}
	}
	turn.TTFT = upstream.ttft
	if relayErr != nil {
		s.relayFailed(w, r, d, &turn, relayErr, isEventStream(resp.Header.Get("Content-Type")))
	}
}

// readBody reads a bounded request body, answering 413 or 400 itself.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, fail func(int, string, string)) ([]byte, bool) {
	rd := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	var body []byte
	var err error
	if n := r.ContentLength; n > 0 && n <= s.cfg.MaxBodyBytes {
		// One allocation of the announced size instead of ReadAll's doublings.
		body = make([]byte, n)
		_, err = io.ReadFull(rd, body)
	} else {
		body, err = io.ReadAll(rd)
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			fail(http.StatusRequestEntityTooLarge, "request_too_large",
				fmt.Sprintf("Request body is larger than %d bytes.", tooBig.Limit))
			return nil, false
		}
		fail(http.StatusBadRequest, "", "Could not read the request body.")
		return nil, false
	}
	return body, true
}

// send calls the upstream, answering 502 itself when it cannot be reached.
func (s *Server) send(w http.ResponseWriter, r *http.Request, e *entry, turn *trace.Turn, path string, h http.Header,
	body dialects.Body, fail func(int, string, string)) (*http.Response, bool) {
	resp, attempts, err := s.cfg.Upstream.Relay(r.Context(), path, h, body)
	turn.Attempts = attempts
	if err != nil {
		if r.Context().Err() != nil {
			turn.Status, turn.Error = statusClientClosed, "client closed request"
			return nil, false
		}
		s.cfg.Logger.Warn("upstream call failed", "rollout", e.rollout.Key, "err", err)
		fail(http.StatusBadGateway, "upstream_unavailable", "The upstream model provider could not be reached.")
		turn.Error = "upstream: " + err.Error()
		return nil, false
	}
	return resp, true
}

// upstreamReadError is a relay that broke on the upstream's side.
type upstreamReadError struct{ err error }

func (e *upstreamReadError) Error() string { return "upstream: " + e.err.Error() }
func (e *upstreamReadError) Unwrap() error { return e.err }

// relayFailed records a relay cut short. When the upstream broke a stream,
// the caller gets an error event in its dialect so its SDK fails cleanly
// instead of waiting for an end that never comes.
func (s *Server) relayFailed(w http.ResponseWriter, r *http.Request, d dialects.Dialect, turn *trace.Turn, err error, streaming bool) {
	if r.Context().Err() != nil {
		turn.Error = "client closed request"
		return
	}
	turn.Error = "relay: " + err.Error()
	var up *upstreamReadError
	if streaming && errors.As(err, &up) {
		_, _ = w.Write(d.StreamError("The upstream stream broke off: " + up.err.Error()))
		_ = http.NewResponseController(w).Flush()
	}
}

// relaySSE copies an event stream line by line, flushing after every event,
// and hands each event's data to onEvent. It never holds more than one event,
// and stops after the event onEvent calls the last: a caller that has its
// answer may hang up before the upstream closes the stream.
func relaySSE(w http.ResponseWriter, upstream io.Reader, onEvent func(data []byte) (last bool)) error {
	rc := http.NewResponseController(w)
	br := bufio.NewReaderSize(upstream, 4<<10) // per open stream: kept small; longer lines still work
	var data bytes.Buffer
	hasData := false
	dispatch := func() (last bool) {
		if hasData {
			last = onEvent(data.Bytes())
		}
		data.Reset()
		hasData = false
		return last
	}
	var long []byte // a line longer than br's buffer
	for {
		line, readErr := br.ReadSlice('\n') // valid until the next read: used at once
		if readErr == bufio.ErrBufferFull {
			long = append(long[:0], line...)
			for readErr == bufio.ErrBufferFull {
				line, readErr = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if readErr != nil && readErr != io.EOF {
			line = nil // a line cut by a broken upstream never reaches the caller
		}
		if len(line) > 0 {
			if _, err := w.Write(line); err != nil {
				return fmt.Errorf("write to caller: %w", err)
			}
			field := bytes.TrimRight(line, "\r\n")
			switch {
			case len(field) == 0:
				if err := rc.Flush(); err != nil {
					return fmt.Errorf("flush to caller: %w", err)
				}
				if dispatch() {
					return nil
				}
			case bytes.HasPrefix(field, []byte("data:")):
				v := bytes.TrimPrefix(field[len("data:"):], []byte(" "))
				if hasData {
					data.WriteByte('\n')
				}
				data.Write(v)
				hasData = true
			}
		}
		if readErr != nil {
			_ = rc.Flush()
			dispatch() // a last event without its blank line
			if readErr == io.EOF {
				return nil
			}
			return &upstreamReadError{readErr}
		}
	}
}

func isEventStream(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "text/event-stream"
}

// hopByHop are the headers that concern one connection, not the message
// (RFC 9110, section 7.6.1).
var hopByHop = []string{
	"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func copyHeaders(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
	for _, v := range src.Values("Connection") {
		for name := range strings.SplitSeq(v, ",") {
			dst.Del(strings.TrimSpace(name))
		}
	}
	for _, k := range hopByHop {
		dst.Del(k)
	}
}

// firstByteReader notes when the first byte of the upstream body arrives.
type firstByteReader struct {
	r     io.Reader
	start time.Time
	ttft  time.Duration
	seen  bool
}

func (f *firstByteReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if n > 0 && !f.seen {
		f.seen = true
		f.ttft = time.Since(f.start)
	}
	return n, err
}
