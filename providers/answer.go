package providers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"sync"
	"sync/atomic"
	"time"
)

// Timeout defaults. A model may think for minutes before the headers of a
// call that does not stream; a stream sends events (or keep-alive
// comments) while it thinks. Both are below the default harness timeout
// (10 minutes), so that a provider that hangs is an upstream error of the
// rollout, retried, before the harness is killed and scored as timed out.
const (
	DefaultResponseHeaderTimeout = 5 * time.Minute
	DefaultStreamIdleTimeout     = 3 * time.Minute
)

// How an upstream failed, as a *FailureError's Kind names it. The values
// are trace.UpstreamFailure's (the interception server records them on
// the turn).
const (
	// FailureConnection: the connection could not be made, or broke (cut
	// or reset) before the answer was whole.
	FailureConnection = "connection"
	// FailureTimeout: no headers within ResponseHeaderTimeout, or no byte
	// of the answer's body for StreamIdleTimeout.
	FailureTimeout = "timeout"
	// FailureTruncated: an event stream that ended before its first event.
	FailureTruncated = "truncated"
	// FailureBadAnswer: a 2xx answer that is not a JSON object.
	FailureBadAnswer = "bad_answer"
)

// FailureError is an answer the upstream failed to give: Kind says how.
// Relay retries them before any byte reaches its caller; reading the rest
// of a stream returns them too.
type FailureError struct {
	Kind string
	Err  error
}

// Error implements error.
func (e *FailureError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *FailureError) Unwrap() error { return e.Err }

// UpstreamFailure is Kind: callers that do not import this package find it
// by type assertion.
func (e *FailureError) UpstreamFailure() string { return e.Kind }

// Timeout reports whether the upstream took too long, as net.Error does.
func (e *FailureError) Timeout() bool { return e.Kind == FailureTimeout }

// watchdog bounds one attempt's waits: for the headers, then between the
// reads of its body. It cancels the attempt's context, with a
// FailureError as the cause, when one is too long.
type watchdog struct {
	parent          context.Context
	ctx             context.Context
	cancel          context.CancelCauseFunc
	timer           *time.Timer
	headers, idle   time.Duration
	headersReceived atomic.Bool
}

func newWatchdog(parent context.Context, headers, idle time.Duration) *watchdog {
	w := &watchdog{parent: parent, headers: headers, idle: idle}
	w.ctx, w.cancel = context.WithCancelCause(parent)
	w.timer = time.AfterFunc(headers, w.fire)
	return w
}

func (w *watchdog) fire() {
	err := fmt.Errorf("no response headers within %v", w.headers)
	if w.headersReceived.Load() {
		err = fmt.Errorf("no byte of the answer for %v", w.idle)
	}
	w.cancel(&FailureError{Kind: FailureTimeout, Err: err})
}

// touch notes progress (the headers, a read of the body): the next byte
// is due within the idle timeout.
func (w *watchdog) touch() {
	w.headersReceived.Store(true)
	w.timer.Reset(w.idle)
}

// stop ends the watch and the attempt's context.
func (w *watchdog) stop() {
	w.timer.Stop()
	w.cancel(nil)
}

// explain turns an error of the attempt into what it means: the caller's
// own context error when it gave up, the watchdog's timeout when it fired,
// and a connection failure otherwise.
func (w *watchdog) explain(err error) error {
	if w.parent.Err() != nil {
		return w.parent.Err()
	}
	var f *FailureError
	if cause := context.Cause(w.ctx); errors.As(cause, &f) {
		return f
	}
	if errors.As(err, &f) {
		return f
	}
	return &FailureError{Kind: FailureConnection, Err: err}
}

// readWhole reads a body that is not a stream, all of it.
func readWhole(body io.Reader, size int64, w *watchdog) ([]byte, error) {
	n := 512
	if size > 0 && size < 64<<20 {
		n = int(size) + 1 // room to see the EOF without growing
	}
	return readUntil(body, make([]byte, 0, n), w, nil)
}

// readUntil appends what body yields to buf until EOF or until done says
// the bytes read so far (the new ones from index from) are enough.
func readUntil(body io.Reader, buf []byte, w *watchdog, done func(buf []byte, from int) bool) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		if n > 0 {
			w.touch()
			buf = buf[:len(buf)+n]
			if done != nil && done(buf, len(buf)-n) {
				return buf, nil
			}
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, w.explain(err)
		}
	}
}

// isJSONObject is the check a 2xx answer must pass before it is handed on:
// a JSON object, first and last bytes. It costs nothing next to a parse,
// and catches what providers get wrong in practice: an empty body, an
// HTML page from a proxy, an answer cut short. A body whose middle is
// malformed is caught when the turn is recorded.
func isJSONObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) >= 2 && b[0] == '{' && b[len(b)-1] == '}'
}

// peekEvent reads a stream up to the end of its first event (a blank
// line), so that a stream that breaks, hangs or ends before it can be
// retried: nothing of it has reached the caller yet.
func peekEvent(body io.Reader, w *watchdog) ([]byte, error) {
	ended := false
	buf, err := readUntil(body, make([]byte, 0, 4<<10), w, func(buf []byte, from int) bool {
		ended = eventEnd(buf[max(0, from-3):])
		return ended
	})
	if err == nil && !ended {
		err = &FailureError{Kind: FailureTruncated, Err: errors.New("event stream ended before its first event")}
	}
	return buf, err
}

// eventEnd reports whether b holds a blank line: the end of an SSE event.
func eventEnd(b []byte) bool {
	return bytes.Contains(b, []byte("\n\n")) || bytes.Contains(b, []byte("\n\r\n")) || bytes.Contains(b, []byte("\r\r"))
}

func isEventStream(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "text/event-stream"
}

// wholeBody is a body read whole before Relay returned. Bytes hands the
// bytes over without a copy.
type wholeBody struct {
	bytes.Reader
	data []byte
}

func newWholeBody(data []byte) *wholeBody {
	b := &wholeBody{data: data}
	b.Reset(data)
	return b
}

// Bytes returns the whole body.
func (b *wholeBody) Bytes() []byte { return b.data }

// Close implements io.Closer.
func (b *wholeBody) Close() error { return nil }

// streamBody is the rest of a stream after its first event: reads keep
// the watchdog's idle timeout and return FailureErrors, and the call's
// place under the limit is given back when the stream ends or is closed.
type streamBody struct {
	head []byte // the first event, read by peekEvent
	rc   io.ReadCloser
	w    *watchdog
	t    ticket
	once sync.Once
}

// Read implements io.Reader.
func (s *streamBody) Read(p []byte) (int, error) {
	if len(s.head) > 0 {
		n := copy(p, s.head)
		s.head = s.head[n:]
		return n, nil
	}
	n, err := s.rc.Read(p)
	if n > 0 {
		s.w.touch()
	}
	if err != nil {
		if err != io.EOF {
			err = s.w.explain(err)
		}
		s.end(err == io.EOF)
	}
	return n, err
}

// Close implements io.Closer.
func (s *streamBody) Close() error {
	err := s.rc.Close()
	s.end(true)
	return err
}

func (s *streamBody) end(ok bool) {
	s.once.Do(func() {
		s.w.stop()
		s.t.done(ok)
	})
}
