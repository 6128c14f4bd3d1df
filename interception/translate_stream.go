package interception

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/trace"
)

// translateStream answers a streaming caller from the upstream's stream:
// each upstream event is assembled for the turn by the upstream's Stream
// and what it made known is written at once, in the caller's dialect, by
// the caller's StreamWriter, flushed per event. The caller's first event
// leaves when the upstream's first event arrives, not when its answer is
// whole.
//
// providers.Client retried the call until the stream's first event: what
// fails after it reaches the caller as an error event in its dialect, and
// the turn records how the upstream failed, as on the relay arm.
func (s *Server) translateStream(c *recorder, resp *http.Response) {
	c.turn.Status = http.StatusOK
	h := c.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	c.w.WriteHeader(http.StatusOK)

	upstream := c.firstByte(resp.Body)
	stream := s.up.NewStream()
	tokens := tokenStream(c.e.rollout, s.up)
	// The caller's events made of one upstream event leave together: one
	// flush per upstream event, not per event written.
	out := dialects.StreamWriterFor(c.d, writeOnly{c.w}, c.turn.Request)
	rc := http.NewResponseController(c.w)
	var upErr, writeErr error
	flush := func() {
		if err := rc.Flush(); err != nil && writeErr == nil {
			writeErr = err
		}
	}
	finish := func() {
		c.deliver() // the caller's answer is whole with the next write
		writeErr = out.Emit(dialects.Event{Type: dialects.EventFinish, Response: stream.Response()})
		if writeErr == nil {
			flush()
		}
	}
	readErr := eachEvent(upstream, func(data []byte) bool {
		if tokens != nil {
			tokens.Add(data)
		}
		if err := stream.Add(data); err != nil {
			upErr = err
			return true
		}
		evs := stream.Events()
		for _, ev := range evs {
			if writeErr = out.Emit(ev); writeErr != nil {
				return true
			}
		}
		if stream.Done() {
			finish()
			return true
		}
		if len(evs) > 0 {
			flush()
		}
		return writeErr != nil
	})
	c.turn.TTFT = upstream.ttft
	c.turn.Response = stream.Response()
	if tokens != nil {
		c.turn.Tokens = tokens.Tokens()
	}
	switch {
	case writeErr != nil:
		relayFailed(c, fmt.Errorf("write to caller: %w", writeErr))
	case upErr != nil:
		// An error event of the upstream's, or an event that does not
		// read: the caller gets an error event in its dialect, and the
		// turn records it.
		c.turn.Error = upErr.Error()
		c.turn.UpstreamFailure = errorEventFailure(upErr)
		if !isErrorEvent(upErr) {
			c.turn.UpstreamFailure = trace.UpstreamBadAnswer
		}
		c.deliver()
		_, _ = c.w.Write(c.d.StreamError(errorMessage(upErr)))
		_ = http.NewResponseController(c.w).Flush()
	case readErr != nil:
		relayFailed(c, &upstreamReadError{readErr})
	case !stream.Done() && c.turn.Response.FinishReason != "" && s.up.Name() != dialects.NameResponses:
		// A stream that gave its finish reason but not its last event
		// (chat's [DONE], Anthropic's message_stop) is whole. A Responses
		// stream is whole only with its terminal event: the status of
		// response.created reads as a finish.
		finish()
		if writeErr != nil {
			relayFailed(c, fmt.Errorf("write to caller: %w", writeErr))
		}
	case !stream.Done():
		relayFailed(c, &upstreamReadError{&truncatedError{}})
	}
}

// writeOnly hides the flushing of a ResponseWriter from a StreamWriter,
// which flushes what it can.
type writeOnly struct{ w io.Writer }

func (w writeOnly) Write(p []byte) (int, error) { return w.w.Write(p) }

// isErrorEvent says whether err is an error event of the stream, rather
// than an event that does not read.
func isErrorEvent(err error) bool {
	var ce *dialects.ChatError
	var ae *dialects.AnthropicError
	return errors.As(err, &ce) || errors.As(err, &ae)
}

// errorMessage is what an upstream's error event says.
func errorMessage(err error) string {
	var ce *dialects.ChatError
	var ae *dialects.AnthropicError
	switch {
	case errors.As(err, &ce) && ce.Message != "":
		return ce.Message
	case errors.As(err, &ae) && ae.Message != "":
		return ae.Message
	}
	return err.Error()
}

// eachEvent reads an event stream and hands each event's data to
// onEvent, until onEvent says it has had the last or the stream ends. A
// read error other than the stream's end is returned.
func eachEvent(r io.Reader, onEvent func(data []byte) (last bool)) error {
	br := bufio.NewReaderSize(r, 4<<10)
	var data bytes.Buffer
	hasData := false
	dispatch := func() bool {
		last := hasData && onEvent(data.Bytes())
		data.Reset()
		hasData = false
		return last
	}
	var long []byte // a line longer than br's buffer
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long[:0], line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil && err != io.EOF {
			return err // a line cut by a broken upstream is no event
		}
		field := bytes.TrimRight(line, "\r\n")
		switch {
		case len(field) == 0 && len(line) > 0:
			if dispatch() {
				return nil
			}
		case bytes.HasPrefix(field, []byte("data:")):
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(bytes.TrimPrefix(field[len("data:"):], []byte(" ")))
			hasData = true
		}
		if err == io.EOF {
			dispatch() // a last event without its blank line
			return nil
		}
	}
}
