package interception

import (
	"errors"
	"io"
	"net/http"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/trace"
)

// translate serves a call whose dialect the upstream does not speak: the
// typed request, with the run's model and sampling, goes to the upstream
// in its dialect; the typed answer comes back in the caller's dialect.
// When the caller streams, the upstream is asked to stream and its events
// are written to the caller in the caller's dialect as they arrive
// (translate_stream.go); an upstream that answers a whole JSON object
// instead is replayed as a complete SSE sequence. Upstream errors come
// back in the caller's shape with their status. Every answer carries the
// upstream's request id (headers.go).
func (s *Server) translate(c *recorder, body []byte) {
	req, err := c.d.ParseRequest(body)
	if err != nil {
		c.fail(http.StatusBadRequest, "", badJSON+err.Error())
		return
	}
	c.turn.Request = overlaid(req, c.e.rollout)
	c.turn.Streamed = req.Stream
	resp, ok := s.callUpstream(c)
	if !ok {
		return
	}
	defer resp.Body.Close()
	passRequestID(c.w.Header(), resp.Header, c.d, s.up)
	if c.turn.Streamed && resp.StatusCode/100 == 2 && isEventStream(resp.Header.Get("Content-Type")) {
		s.translateStream(c, resp)
		return
	}
	data, ok := readWhole(c, resp)
	if !ok {
		return
	}
	answer, ok := s.readAnswer(c, resp.StatusCode, data)
	if !ok {
		return
	}
	c.turn.Response = answer
	c.turn.Tokens = answerTokens(c.e.rollout, s.up, data)
	c.turn.Status = http.StatusOK
	writeAnswer(c, answer)
}

// callUpstream sends the turn's request to the upstream in its dialect,
// streaming when the caller streams, with the caller's headers that mean
// the same there (headers.go).
func (s *Server) callUpstream(c *recorder) (*http.Response, bool) {
	req := c.turn.Request
	req.Stream = false
	if claude, ok := s.cfg.ClaudeModels[req.Model]; ok {
		traits := dialects.ClaudeTraitsOf(claude)
		req.Claude = &traits
	}
	var body []byte
	var err error
	if c.turn.Streamed {
		body, err = dialects.EncodeStreamRequest(s.up, req)
	} else {
		body, err = s.up.EncodeRequest(req)
	}
	var out dialects.Body
	if err == nil {
		out, _, err = withTokenFields(c.e.rollout, s.up, dialects.Body{body})
	}
	if err != nil {
		// A setting the upstream cannot take is named, with OpenAI's code
		// for it.
		code := ""
		var fe *dialects.FieldError
		if errors.As(err, &fe) {
			code = "unsupported_parameter"
		}
		c.fail(http.StatusBadRequest, code, "The request cannot be sent to the upstream: "+err.Error())
		return nil, false
	}
	out, path, failed := s.withTokenIn(c, out, s.up.Path())
	if failed {
		return nil, false
	}
	return c.send(path, translatedHeaders(c.r.Header, c.d, s.up), out)
}

// readWhole reads an upstream answer whole.
func readWhole(c *recorder, resp *http.Response) ([]byte, bool) {
	upstream := c.firstByte(resp.Body)
	data, err := io.ReadAll(upstream)
	c.turn.TTFT = upstream.ttft
	if err != nil {
		if c.clientGone() {
			return nil, false
		}
		c.upstreamFailed(failureOf(err), "upstream: "+err.Error())
		return nil, false
	}
	return data, true
}

// readAnswer reads the upstream's answer. An error answer is passed on to
// the caller, in its dialect, with the upstream's status and code.
func (s *Server) readAnswer(c *recorder, status int, data []byte) (dialects.Response, bool) {
	if status < 200 || status > 299 {
		upErr := s.up.ParseError(status, data)
		code, msg := dialects.ErrorCode(upErr)
		c.turn.UpstreamFailure = statusFailure(status)
		c.failWith(upErr.Error(), status, code, msg)
		return dialects.Response{}, false
	}
	answer, err := s.up.ParseResponse(data)
	if err != nil {
		c.upstreamFailed(trace.UpstreamBadAnswer, "upstream: "+err.Error())
		return dialects.Response{}, false
	}
	return answer, true
}

// writeAnswer answers the caller in its dialect: a complete SSE sequence
// when it streams, one JSON object otherwise.
func writeAnswer(c *recorder, answer dialects.Response) {
	if c.turn.Streamed {
		c.w.Header().Set("Content-Type", "text/event-stream")
		c.w.Header().Set("Cache-Control", "no-cache")
		c.w.WriteHeader(http.StatusOK)
		if err := dialects.WriteStreamFor(c.d, c.w, c.turn.Request, answer); err != nil {
			c.turn.Error = "write to caller: " + err.Error()
		}
		return
	}
	out, err := c.d.EncodeResponse(dialects.AnswerFor(c.turn.Request, answer))
	if err != nil {
		c.failWith(err.Error(), http.StatusInternalServerError, "", "The answer could not be encoded.")
		return
	}
	c.w.Header().Set("Content-Type", "application/json")
	c.w.WriteHeader(http.StatusOK)
	if _, err := c.w.Write(out); err != nil {
		c.turn.Error = "write to caller: " + err.Error()
	}
}
