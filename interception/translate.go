package interception

import (
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/trace"
)

// translate serves a call whose dialect d the upstream (of dialect up) does
// not speak: the typed request, with the run's model and sampling, goes to
// the upstream in its dialect without streaming; the typed answer comes back
// in d, as one JSON object or, when the caller streams, as a complete SSE
// sequence of d. Upstream errors come back in d's shape with their status.
func (s *Server) translate(w http.ResponseWriter, r *http.Request, e *entry, d, up dialects.Dialect,
	turn *trace.Turn, fail func(int, string, string)) {
	req := turn.Request
	req.Stream = false
	body, err := up.EncodeRequest(req)
	if err != nil {
		fail(http.StatusBadRequest, "", "The request cannot be sent to the upstream: "+err.Error())
		return
	}
	resp, ok := s.send(w, r, e, turn, up.Path(), nil, dialects.Body{body}, fail)
	if !ok {
		return
	}
	defer resp.Body.Close()
	upstream := &firstByteReader{r: resp.Body, start: turn.StartedAt}
	data, err := io.ReadAll(upstream)
	turn.TTFT = upstream.ttft
	if err != nil {
		if r.Context().Err() != nil {
			turn.Status, turn.Error = statusClientClosed, "client closed request"
			return
		}
		fail(http.StatusBadGateway, "upstream_unavailable", "The upstream model provider broke off its answer.")
		turn.Error = "upstream: " + err.Error()
		return
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		upErr := up.ParseError(resp.StatusCode, data)
		code, msg := dialects.ErrorCode(upErr)
		fail(resp.StatusCode, code, msg)
		turn.Error = upErr.Error()
		return
	}
	answer, err := up.ParseResponse(data)
	if err != nil {
		fail(http.StatusBadGateway, "bad_upstream_response", "The upstream model provider's answer could not be read.")
		turn.Error = "upstream: " + err.Error()
		return
	}
	turn.Response = answer
	turn.Status = http.StatusOK
	if turn.Streamed {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		if err := d.WriteStream(w, answer); err != nil {
			turn.Error = "write to caller: " + err.Error()
		}
		return
	}
	out, err := d.EncodeResponse(answer)
	if err != nil {
		fail(http.StatusInternalServerError, "", "The answer could not be encoded.")
		turn.Error = err.Error()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(out); err != nil {
		turn.Error = "write to caller: " + err.Error()
	}
}

// countTokens answers Anthropic's count_tokens: relayed to an Anthropic
// upstream with the run's model, estimated (dialects.EstimateTokens)
// otherwise. It is not a model turn and is not recorded.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request, e *entry, d dialects.Dialect) {
	fail := func(status int, code, msg string) { d.WriteError(w, status, code, msg) }
	body, ok := s.readBody(w, r, fail)
	if !ok {
		return
	}
	req, err := d.ParseRequest(body)
	if err != nil {
		fail(http.StatusBadRequest, "", "We could not parse the JSON body of your request: "+err.Error())
		return
	}
	if s.up.Name() != d.Name() {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]int{"input_tokens": dialects.EstimateTokens(req)})
		return
	}
	out, err := d.Overlay(body, e.rollout.Model, dialects.Sampling{})
	if err != nil {
		fail(http.StatusBadRequest, "", "We could not parse the JSON body of your request: "+err.Error())
		return
	}
	var turn trace.Turn // not recorded
	turn.StartedAt = time.Now()
	resp, ok := s.send(w, r, e, &turn, "/messages/count_tokens", r.Header, out, fail)
	if !ok {
		return
	}
	defer resp.Body.Close()
	copyHeaders(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}
