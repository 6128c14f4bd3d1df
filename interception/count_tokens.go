package interception

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/evalflow/evalflow/dialects"
)

// countTokens answers Anthropic's count_tokens: relayed to an Anthropic
// upstream with the run's model, estimated (dialects.EstimateTokens)
// otherwise. It is not a model turn and is not recorded.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request, e *entry, d dialects.Dialect) {
	c := s.startCall(w, r, e, d)
	body, ok := c.readBody()
	if !ok {
		return
	}
	req, err := d.ParseRequest(body)
	if err != nil {
		c.fail(http.StatusBadRequest, "", badJSON+err.Error())
		return
	}
	if s.up.Name() != d.Name() {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]int{"input_tokens": dialects.EstimateTokens(req)})
		return
	}
	out, err := d.Overlay(body, e.rollout.Model, dialects.Sampling{})
	if err != nil {
		c.fail(http.StatusBadRequest, "", badJSON+err.Error())
		return
	}
	resp, ok := c.send("/messages/count_tokens", r.Header, out)
	if !ok {
		return
	}
	defer resp.Body.Close()
	copyHeaders(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}
