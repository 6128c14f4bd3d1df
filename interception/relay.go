package interception

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/trace"
)

// relay serves a call in the upstream's own dialect: the caller's body goes
// up with only the run's model and sampling set on it (Overlay), and the
// answer, JSON or SSE, comes back byte for byte, flushed per event. The
// turn keeps the bytes and is parsed when it is read (turns.go).
func (s *Server) relay(c *recorder, body []byte) {
	// The overlay checks the body's syntax and shape; the typed parse waits
	// until the turn is read.
	out, err := c.d.Overlay(body, c.e.rollout.Model, c.e.rollout.Sampling)
	if err != nil {
		c.fail(http.StatusBadRequest, "", badJSON+err.Error())
		return
	}
	if out, c.trim, err = withTokenFields(c.e.rollout, c.d, out); err != nil {
		c.fail(http.StatusBadRequest, "", badJSON+err.Error())
		return
	}
	c.raw = rawTurn{dialect: c.d, request: body}
	out, path, failed := s.withTokenIn(c, out, c.d.Path())
	if failed {
		return
	}
	resp, ok := c.send(path, c.r.Header, out)
	if !ok {
		return
	}
	defer resp.Body.Close()
	c.turn.Status = resp.StatusCode
	c.turn.UpstreamFailure = statusFailure(resp.StatusCode)
	if !isEventStream(resp.Header.Get("Content-Type")) {
		relayJSON(c, resp, s.cfg.MaxBodyBytes)
		return
	}
	copyHeaders(c.w.Header(), resp.Header)
	c.w.WriteHeader(resp.StatusCode)
	upstream := c.firstByte(resp.Body)
	err = relayStream(c, upstream, resp.StatusCode)
	c.turn.TTFT = upstream.ttft
	if err != nil {
		relayFailed(c, err)
	}
}

// relayStream relays an event stream, assembling the answer for the turn
// as it goes. The caller has its answer at the stream's terminal event.
func relayStream(c *recorder, upstream io.Reader, status int) error {
	c.turn.Streamed = true // until the request is parsed
	stream := c.d.NewStream()
	tokens := tokenStream(c.e.rollout, c.d)
	var trim func([]byte) []byte
	if c.trim != nil {
		trim = c.trim.Trim
	}
	err := relaySSE(c.w, upstream, trim, func(data []byte) bool {
		if tokens != nil {
			tokens.Add(data)
		}
		if err := stream.Add(data); err != nil && c.turn.Error == "" {
			c.turn.Error = err.Error()
			if f := errorEventFailure(err); f != "" {
				c.turn.UpstreamFailure = f
			}
		}
		if stream.Done() {
			c.deliver()
		}
		return stream.Done()
	})
	c.turn.Response = stream.Response()
	if tokens != nil {
		c.turn.Tokens = tokens.Tokens()
	}
	ended := stream.Done() || c.turn.Response.FinishReason != ""
	if err == nil && !ended && c.turn.Error == "" && status/100 == 2 {
		err = &upstreamReadError{&truncatedError{}}
	}
	return err
}

// truncatedError is a stream that ended before its terminal event.
type truncatedError struct{}

func (*truncatedError) Error() string           { return "stream ended before its last event" }
func (*truncatedError) UpstreamFailure() string { return string(trace.UpstreamTruncated) }

// errorEventFailure says whether an error event of a stream reports a
// failure of the provider's own (rather than of the request).
func errorEventFailure(err error) trace.UpstreamFailure {
	var typ string
	var ce *dialects.ChatError
	var ae *dialects.AnthropicError
	switch {
	case errors.As(err, &ce):
		typ = ce.Type
	case errors.As(err, &ae):
		typ = ae.Type
	}
	switch typ {
	case dialects.ErrorTypeServer, "api_error", "overloaded_error", "rate_limit_error", "rate_limit_exceeded", "server_is_overloaded":
		return trace.UpstreamErrorEvent
	}
	return ""
}

// relayJSON relays a whole answer, keeping its bytes for the turn. It is
// read whole before any of it is written, so that an upstream that breaks
// off is answered with a well-formed error rather than half an answer.
func relayJSON(c *recorder, resp *http.Response, maxBody int64) {
	var data []byte
	if whole, ok := resp.Body.(interface{ Bytes() []byte }); ok {
		// Read already (providers.Client): no copy.
		data = whole.Bytes()
		c.turn.TTFT = time.Since(c.turn.StartedAt)
	} else {
		upstream := c.firstByte(resp.Body)
		var err error
		data, err = readAnswer(upstream, resp.ContentLength, maxBody)
		c.turn.TTFT = upstream.ttft
		if err != nil {
			if c.clientGone() {
				return
			}
			c.upstreamFailed(failureOf(err), "upstream: "+err.Error())
			return
		}
	}
	copyHeaders(c.w.Header(), resp.Header)
	answer := data // the turn keeps the upstream's, token data and all
	if c.trim != nil && resp.StatusCode/100 == 2 {
		answer = c.trim.Trim(data)
		c.w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
	}
	c.w.WriteHeader(resp.StatusCode)
	// The caller has the whole answer before the turn is recorded (a
	// large one as soon as Write returns): Turns, Finish and the
	// rollout's next token-in call wait for it from before the write.
	c.deliver()
	if _, err := c.w.Write(answer); err != nil {
		relayFailed(c, fmt.Errorf("write to caller: %w", err))
		return
	}
	_ = http.NewResponseController(c.w).Flush()
	c.raw.answered, c.raw.status, c.raw.answer = true, resp.StatusCode, data
}

// readAnswer reads a whole answer of announced size n (-1 when unknown)
// into one allocation of that size, plus a byte to read the EOF into.
func readAnswer(r io.Reader, n, maxBody int64) ([]byte, error) {
	if n <= 0 || n > maxBody {
		return io.ReadAll(r)
	}
	data := make([]byte, 0, n+1)
	for {
		k, err := r.Read(data[len(data):cap(data)])
		data = data[:len(data)+k]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
		if len(data) == cap(data) { // longer than announced
			data = append(data, 0)[:len(data)]
		}
	}
}

// relayFailed records a stream cut short, relayed or translated. When the upstream broke a stream,
// the caller gets an error event in its dialect so its SDK fails cleanly
// instead of waiting for an end that never comes, and the turn records how
// the upstream failed.
func relayFailed(c *recorder, err error) {
	var up *upstreamReadError
	upstream := errors.As(err, &up)
	if upstream && !errors.Is(up.err, context.Canceled) {
		// The provider failed the call whether or not the caller is still
		// there to hear it (a harness killed at its timeout while the
		// stream broke off is the provider's failure, not the agent's);
		// a read cancelled because the caller left is not.
		c.turn.UpstreamFailure = failureOf(up.err)
	}
	if c.r.Context().Err() != nil {
		c.turn.Error = "client closed request" // its status is sent already
		return
	}
	c.turn.Error = c.arm() + ": " + err.Error()
	if upstream {
		c.deliver() // the error event is the caller's whole answer
		_, _ = c.w.Write(c.d.StreamError("The upstream stream broke off: " + up.err.Error()))
		_ = http.NewResponseController(c.w).Flush()
	}
}

// upstreamReadError is a relay that broke on the upstream's side.
type upstreamReadError struct{ err error }

func (e *upstreamReadError) Error() string { return "upstream: " + e.err.Error() }
func (e *upstreamReadError) Unwrap() error { return e.err }

// relaySSE copies an event stream line by line, flushing after every event,
// and hands each event's data to onEvent. It never holds more than one event,
// and stops after the event onEvent calls the last: a caller that has its
// answer may hang up before the upstream closes the stream. A data line
// reaches the caller with its value rewritten by trim, when set; onEvent
// gets the upstream's.
func relaySSE(w http.ResponseWriter, upstream io.Reader, trim func([]byte) []byte, onEvent func(data []byte) (last bool)) error {
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
			var err error
			if trim != nil && bytes.HasPrefix(line, []byte("data:")) {
				err = writeData(w, line, trim)
			} else {
				_, err = w.Write(line)
			}
			if err != nil {
				return fmt.Errorf("write to caller: %w", err)
			}
			field := bytes.TrimRight(line, "\r\n")
			switch {
			case len(field) == 0:
				// The event is handed on before it is flushed: when it is
				// the terminal one, the turn counts as delivered before the
				// caller can have its whole answer (and read the trace).
				last := dispatch()
				if err := rc.Flush(); err != nil {
					return fmt.Errorf("flush to caller: %w", err)
				}
				if last {
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
			dispatch() // a last event without its blank line
			_ = rc.Flush()
			if readErr == io.EOF {
				return nil
			}
			return &upstreamReadError{readErr}
		}
	}
}

// writeData writes an event's data line with its value rewritten, the
// field's name, the space after it and the line's end as they came.
func writeData(w io.Writer, line []byte, rewrite func([]byte) []byte) error {
	field := bytes.TrimRight(line, "\r\n")
	head, v := field[:len("data:")], field[len("data:"):]
	if len(v) > 0 && v[0] == ' ' {
		head, v = field[:len("data: ")], v[1:]
	}
	for _, p := range [][]byte{head, rewrite(v), line[len(field):]} {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return nil
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
