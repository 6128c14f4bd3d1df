package interception

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
	"unicode/utf8"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/internal/metrics"
	"github.com/evalflow/evalflow/trace"
)

// statusClientClosed records a call whose harness went away before an answer;
// no status reached it (nginx's convention).
const statusClientClosed = 499

// badJSON starts the answer to a body that does not parse.
const badJSON = "We could not parse the JSON body of your request: "

// recorder serves one call of a rollout and keeps the turn it becomes: the
// turn is numbered when the call arrives, filled in as the call goes, and
// recorded for the rollout (turns.go) when it ends. A failure is answered
// in the caller's dialect and recorded alike. Both arms (relay.go,
// translate.go) serve model calls through one; count_tokens is served the
// same way but is no turn, and records nothing.
type recorder struct {
	srv *Server
	w   http.ResponseWriter
	r   *http.Request
	e   *entry
	d   dialects.Dialect // the caller's

	turn trace.Turn
	// index is the turn's number (entry.begin); -1 for a call that is no turn.
	index int
	// delivered is set once the caller has the whole answer, before the
	// turn is recorded (entry.deliver).
	delivered bool
	// raw is the relay arm's turn, kept as bytes and parsed when it is
	// read (turns.go); its dialect is nil on the other arm.
	raw rawTurn
	// counted is set when the call took one of the rollout's turns
	// (entry.admit); sent once it went to the upstream. A counted call
	// never sent gives its turn back when it finishes.
	counted, sent bool
	// tokenKeys are the message keys of a token-in call's request
	// (tokenin.go); nil for other calls.
	tokenKeys []string
	// trim is, on a relay that asks the upstream for token-level data,
	// what the caller asked of it itself, when the answer holds more
	// (tokens.go); nil otherwise.
	trim *dialects.CallerTokens
}

// startTurn starts serving a model call as the rollout's next turn.
// finish records it. A recorder is a value, so that it costs a call no
// allocation: the arms are handed its address.
func (s *Server) startTurn(w http.ResponseWriter, r *http.Request, e *entry, d dialects.Dialect) recorder {
	c := s.startCall(w, r, e, d)
	c.index, c.turn.CallerRetry = e.begin(r.Header)
	c.turn.PolicyVersion = e.rollout.startedOn()
	return c
}

// startCall starts serving a call that is no model turn: it is answered
// like one, and never recorded.
func (s *Server) startCall(w http.ResponseWriter, r *http.Request, e *entry, d dialects.Dialect) recorder {
	return recorder{srv: s, w: w, r: r, e: e, d: d, index: -1,
		turn: trace.Turn{Dialect: d.Name(), Route: r.URL.Path, StartedAt: time.Now()}}
}

// finish records the turn, tells Config.OnTurn, and logs the call.
func (c *recorder) finish() {
	if c.counted && !c.sent {
		c.e.unadmit()
	}
	if c.index < 0 {
		return
	}
	c.turn.Latency = time.Since(c.turn.StartedAt)
	var raw *rawTurn
	switch {
	case c.raw.answered && (c.e.rollout.Limits.Tokens > 0 || c.e.rollout.Limits.SeqLen > 0 ||
		c.e.rollout.Limits.CostUSD > 0 || c.tokenKeys != nil):
		// The rollout's token limits need the answer's usage now, and
		// token-in the answer's message and ids.
		c.turn = materialize(c.turn, c.raw, c.e.rollout)
	case c.raw.dialect != nil:
		raw = &c.raw
	}
	// Before the turn is recorded: a call waiting for it (tokenIn) reads
	// what it remembers.
	c.e.remember(c.turn, c.index, c.tokenKeys)
	c.e.record(c.index, c.turn, raw, c.delivered)
	if c.srv.cfg.Metrics != nil {
		c.srv.cfg.Metrics.Called(metrics.Call{
			Dialect: c.turn.Dialect, Arm: c.arm(), Status: c.turn.Status,
			Latency: c.turn.Latency, TTFT: c.turn.TTFT, Attempts: c.turn.Attempts,
			UpstreamFailure: string(c.turn.UpstreamFailure),
		})
	}
	turn := c.turn
	if c.srv.cfg.OnTurn != nil {
		turn = c.e.turn(c.index)
		c.srv.cfg.OnTurn(c.e.rollout.Key, turn)
	}
	c.srv.cfg.Logger.Debug("model call", "rollout", c.e.rollout.Key, "route", turn.Route,
		"status", turn.Status, "attempts", turn.Attempts, "latency", turn.Latency, "error", turn.Error)
}

// arm is how the call was served: relayed to an upstream of the caller's
// dialect, or translated.
func (c *recorder) arm() string {
	if c.srv.up.Name() == c.d.Name() {
		return "relay"
	}
	return "translate"
}

// fail answers the caller with an error in its dialect and records it.
func (c *recorder) fail(status int, code, message string) {
	c.failWith(message, status, code, message)
}

// failWith answers like fail, and records the error as what: what went
// wrong upstream, of which the caller is told less. An error is the
// caller's whole answer: Turns and Finish wait for its turn.
func (c *recorder) failWith(what string, status int, code, message string) {
	c.turn.Status, c.turn.Error = status, what
	c.deliver()
	c.d.WriteError(c.w, status, code, message)
}

// upstreamFailed answers a call the upstream failed before any of its
// answer reached the caller, with an error in the caller's dialect that
// its SDK reads as a server's failure, and records how it failed.
func (c *recorder) upstreamFailed(kind trace.UpstreamFailure, what string) {
	c.turn.UpstreamFailure = kind
	status, code, message := http.StatusBadGateway, "upstream_unavailable", "The upstream model provider could not be reached, or broke off its answer."
	switch kind {
	case trace.UpstreamTimeout:
		status, code, message = http.StatusGatewayTimeout, "upstream_timeout", "The upstream model provider did not answer in time."
	case trace.UpstreamBadAnswer:
		code, message = "bad_upstream_response", "The upstream model provider's answer could not be read."
	case trace.UpstreamTruncated:
		message = "The upstream model provider's answer ended before it was complete."
	}
	c.failWith(what, status, code, message)
}

// clientGone reports whether the caller went away, and records so.
func (c *recorder) clientGone() bool {
	if c.r.Context().Err() == nil {
		return false
	}
	c.turn.Status, c.turn.Error = statusClientClosed, "client closed request"
	return true
}

// deliver notes that the caller has the whole answer: Turns and Finish
// wait for the turn from now on. A call that is no turn records nothing,
// so nothing waits for it.
func (c *recorder) deliver() {
	if c.index >= 0 && !c.delivered {
		c.e.deliver()
		c.delivered = true
	}
}

// readBody reads the bounded request body within the body read timeout,
// answering 413, 408 or 400 itself.
func (c *recorder) readBody() ([]byte, bool) {
	body, status, code, msg := readBounded(c.w, c.r, c.srv.cfg.MaxBodyBytes, c.srv.cfg.BodyReadTimeout)
	if status != 0 {
		c.fail(status, code, msg)
		return nil, false
	}
	return body, true
}

// readBounded reads r's body, at most limit bytes within timeout, or says
// how to answer instead: 413 for a body over limit (refused unread when its
// length is announced, so a huge body costs no memory), 408 for one slower
// than timeout, 400 for one that cannot be read or is not UTF-8, which
// JSON must be (RFC 8259) and a provider refuses.
func readBounded(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) (body []byte, status int, code, msg string) {
	tooLarge := func() (int, string, string) {
		// What is left of the body is not read: the connection cannot be reused.
		w.Header().Set("Connection", "close")
		return http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("Request body is larger than %d bytes.", limit)
	}
	if r.ContentLength > limit {
		status, code, msg = tooLarge()
		return nil, status, code, msg
	}
	// net/http lifts the deadline itself once the body is read, when its
	// watch for a caller that hangs up starts.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
	rd := http.MaxBytesReader(w, r.Body, limit)
	var err error
	if n := r.ContentLength; n > 0 {
		// One allocation of the announced size instead of ReadAll's doublings.
		body = make([]byte, n)
		_, err = io.ReadFull(rd, body)
	} else {
		body, err = readUnannounced(rd)
	}
	var tooBig *http.MaxBytesError
	var spool *spoolError
	switch {
	case errors.As(err, &spool):
		return nil, http.StatusServiceUnavailable, "body_buffer_unavailable", "The request body could not be buffered."
	case err == nil && !utf8.Valid(body):
		return nil, http.StatusBadRequest, "invalid_encoding", "The request body is not valid UTF-8."
	case err == nil:
		return body, 0, "", ""
	case errors.As(err, &tooBig):
		status, code, msg = tooLarge()
		return nil, status, code, msg
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close")
		return nil, http.StatusRequestTimeout, "request_timeout", fmt.Sprintf("The request body did not arrive within %v.", timeout)
	default:
		return nil, http.StatusBadRequest, "", "Could not read the request body."
	}
}

// spoolAfter is how much of a body of unannounced length (chunked) is read
// into memory; the rest goes to a temporary file until the body ends, so
// that a body refused at the limit never held the limit in the heap, whose
// growth the runtime would keep long after.
const spoolAfter = 256 << 10

// spoolError is a failure of the temporary file, the server's own.
type spoolError struct{ err error }

func (e *spoolError) Error() string { return "spool request body: " + e.err.Error() }
func (e *spoolError) Unwrap() error { return e.err }

// readUnannounced reads a body of unannounced length: up to spoolAfter in
// memory, then to a temporary file, and the whole of it into one
// allocation of its size once it has ended.
func readUnannounced(rd io.Reader) ([]byte, error) {
	var head bytes.Buffer
	if _, err := io.CopyN(&head, rd, spoolAfter+1); errors.Is(err, io.EOF) {
		return head.Bytes(), nil
	} else if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "evalflow-body-*")
	if err != nil {
		return nil, &spoolError{err}
	}
	defer os.Remove(f.Name())
	defer f.Close()
	rest, err := io.Copy(f, rd)
	if err != nil {
		var werr *os.PathError
		if errors.As(err, &werr) && werr.Path == f.Name() {
			return nil, &spoolError{err}
		}
		return nil, err
	}
	body := make([]byte, int64(head.Len())+rest)
	copy(body, head.Bytes())
	if _, err := f.ReadAt(body[head.Len():], 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, &spoolError{err}
	}
	return body, nil
}

// send calls the upstream at path with the caller's headers h (on the
// translate arm, only those it carries across: headers.go), recording the
// attempts it took, and answers 502 or 504
// itself when the upstream failed. A caller retrying on its own gets a
// single attempt (see entry.begin).
func (c *recorder) send(path string, h http.Header, body dialects.Body) (*http.Response, bool) {
	var resp *http.Response
	var attempts int
	var err error
	c.sent = true
	if c.index >= 0 {
		c.e.sending(c.index, c.turn)
	}
	route := c.srv.policy(c.e.rollout)
	var at int
	resp, attempts, at, err = relayRoute(c.r.Context(), route, c.turn.CallerRetry, path, h, body)
	c.turn.Attempts = attempts
	answered(&c.turn, route, at)
	if len(c.turn.FallbackFrom) > 0 {
		c.srv.cfg.Logger.Warn("model call fell back", "rollout", c.e.rollout.Key, "provider", c.turn.Provider, "failed", c.turn.FallbackFrom)
	}
	if err == nil {
		c.answeredBy(resp.Header)
	}
	if err != nil {
		if c.clientGone() {
			return nil, false
		}
		c.srv.cfg.Logger.Warn("upstream call failed", "rollout", c.e.rollout.Key, "provider", c.turn.Provider, "err", err)
		c.upstreamFailed(failureOf(err), "upstream: "+err.Error())
		return nil, false
	}
	return resp, true
}

// firstByte wraps an upstream body to time the turn's first byte.
func (c *recorder) firstByte(body io.Reader) *firstByteReader {
	return &firstByteReader{r: body, start: c.turn.StartedAt}
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
