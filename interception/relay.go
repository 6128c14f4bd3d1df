package interception

import (
	"bufio"
	"bytes"
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

// statusClientClosed records a call whose harness went away before an answer;
// no status reached it (nginx's convention).
const statusClientClosed = 499

// chat relays POST /v1/chat/completions to the upstream and records the turn.
func (s *Server) chat(w http.ResponseWriter, r *http.Request, e *entry) {
	start := time.Now()
	turn := trace.Turn{Dialect: dialects.DialectChat, Route: r.URL.Path, StartedAt: start}
	defer func() {
		turn.Latency = time.Since(start)
		turn = e.record(turn)
		if s.cfg.OnTurn != nil {
			s.cfg.OnTurn(e.rollout.Key, turn)
		}
		s.cfg.Logger.Debug("model call", "rollout", e.rollout.Key, "route", turn.Route,
			"status", turn.Status, "attempts", turn.Attempts, "latency", turn.Latency, "error", turn.Error)
	}()
	fail := func(status int, errType, code, msg string) {
		turn.Status, turn.Error = status, msg
		dialects.WriteChatError(w, status, errType, code, msg)
	}

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			fail(http.StatusRequestEntityTooLarge, dialects.ErrorTypeInvalidRequest, "request_too_large",
				fmt.Sprintf("Request body is larger than %d bytes.", tooBig.Limit))
			return
		}
		fail(http.StatusBadRequest, dialects.ErrorTypeInvalidRequest, "", "Could not read the request body.")
		return
	}
	req, err := dialects.ParseChatRequest(body)
	if err != nil {
		fail(http.StatusBadRequest, dialects.ErrorTypeInvalidRequest, "", "We could not parse the JSON body of your request: "+err.Error())
		return
	}
	out, err := dialects.OverlayChat(body, e.rollout.Model, e.rollout.Sampling)
	if err != nil {
		fail(http.StatusBadRequest, dialects.ErrorTypeInvalidRequest, "", "We could not parse the JSON body of your request: "+err.Error())
		return
	}
	turn.Request = overlaid(req, e.rollout)
	turn.Streamed = req.Stream

	resp, err := s.cfg.Upstream.Do(r.Context(), "/chat/completions", out)
	if err != nil {
		turn.Attempts = attemptsOf(err)
		if r.Context().Err() != nil {
			turn.Status, turn.Error = statusClientClosed, "client closed request"
			return
		}
		s.cfg.Logger.Warn("upstream call failed", "rollout", e.rollout.Key, "err", err)
		fail(http.StatusBadGateway, dialects.ErrorTypeServer, "upstream_unavailable", "The upstream model provider could not be reached.")
		turn.Error = "upstream: " + err.Error()
		return
	}
	defer resp.Body.Close()
	turn.Attempts, _ = strconv.Atoi(resp.Header.Get(AttemptsHeader))
	turn.Status = resp.StatusCode

	copyHeaders(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	upstream := &firstByteReader{r: resp.Body, start: start}

	var relayErr error
	if isEventStream(resp.Header.Get("Content-Type")) {
		var stream dialects.ChatStream
		relayErr = relaySSE(w, upstream, func(data []byte) {
			if err := stream.Add(data); err != nil && turn.Error == "" {
				turn.Error = err.Error()
			}
		})
		turn.Response = stream.Response()
	} else {
		var tee bytes.Buffer
		_, relayErr = io.Copy(w, io.TeeReader(upstream, &tee))
		if relayErr == nil {
			recordJSON(&turn, resp.StatusCode, tee.Bytes())
		}
	}
	turn.TTFT = upstream.ttft
	if relayErr != nil {
		if r.Context().Err() != nil {
			turn.Error = "client closed request"
		} else {
			turn.Error = "relay: " + relayErr.Error()
		}
	}
}

// recordJSON parses a non-streaming answer into the turn.
func recordJSON(turn *trace.Turn, status int, body []byte) {
	if status < 200 || status > 299 {
		turn.Error = dialects.ParseChatError(status, body).Error()
		return
	}
	resp, err := dialects.ParseChatResponse(body)
	if err != nil {
		turn.Error = err.Error()
		return
	}
	turn.Response = resp
}

// overlaid is the request as the upstream saw it.
func overlaid(req dialects.Request, r Rollout) dialects.Request {
	if r.Model != "" {
		req.Model = r.Model
	}
	s := r.Sampling
	if s.Temperature != nil {
		req.Sampling.Temperature = s.Temperature
	}
	if s.TopP != nil {
		req.Sampling.TopP = s.TopP
	}
	if s.MaxTokens != nil {
		req.Sampling.MaxTokens = s.MaxTokens
	}
	if s.Seed != nil {
		req.Sampling.Seed = s.Seed
	}
	return req
}

// attemptsOf reads the attempt count off an upstream error that knows it.
func attemptsOf(err error) int {
	var a interface{ Attempts() int }
	if errors.As(err, &a) {
		return a.Attempts()
	}
	return 0
}

// relaySSE copies an event stream line by line, flushing after every event,
// and hands each event's data to onEvent. It never holds more than one event.
func relaySSE(w http.ResponseWriter, upstream io.Reader, onEvent func(data []byte)) error {
	rc := http.NewResponseController(w)
	br := bufio.NewReaderSize(upstream, 32<<10)
	var data bytes.Buffer
	hasData := false
	dispatch := func() {
		if hasData {
			onEvent(data.Bytes())
		}
		data.Reset()
		hasData = false
	}
	for {
		line, readErr := br.ReadBytes('\n')
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
				dispatch()
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
			return fmt.Errorf("read upstream stream: %w", readErr)
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
	dst.Del(AttemptsHeader)
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
