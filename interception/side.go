package interception

import (
	"encoding/json"
	"net/http"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception/sidecar"
)

// sideProxy is a server as its side routes see it.
type sideProxy struct{ s *Server }

var (
	_ sidecar.Proxy   = sideProxy{}
	_ sidecar.Rollout = (*entry)(nil)
)

// Authenticate finds the rollout by its secret, as the model routes do,
// answering errors in the caller's dialect.
func (p sideProxy) Authenticate(w http.ResponseWriter, r *http.Request) (sidecar.Rollout, dialects.Dialect, bool) {
	d := callerDialect(r.Header)
	e := p.s.authenticate(w, r, d)
	if e == nil {
		return nil, d, false
	}
	return e, d, true
}

// ReadBody reads a body within the server's body read timeout.
func (p sideProxy) ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, int, string, string) {
	return readBounded(w, r, limit, p.s.cfg.BodyReadTimeout)
}

// Model is the rollout's model.
func (e *entry) Model() string { return e.rollout.Model }

// Begun is how many model calls the rollout has begun.
func (e *entry) Begun() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.begun
}

// State is what the rollout shares with the programs beside its harness.
func (e *entry) State() *sidecar.State { return &e.side }

// SetTask sets what a rollout's /task answers: the task as its agent may
// see it (tasksets.Task.ForHarness), never its answer, tests or solution.
func (s *Server) SetTask(key string, task json.RawMessage) bool {
	e := s.entry(key)
	if e == nil {
		return false
	}
	e.side.SetTask(task)
	return true
}

// Side returns what a rollout's tool servers and user left.
func (s *Server) Side(key string) (sidecar.Side, bool) {
	e := s.entry(key)
	if e == nil {
		return sidecar.Side{}, false
	}
	return e.side.Side(), true
}

func (s *Server) entry(key string) *entry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byKey[key]
}

// SetTask sets what the rollout's /task answers (Server.SetTask); false
// once it is released.
func (r *Registration) SetTask(task json.RawMessage) bool {
	return r.live() && r.m.srv.SetTask(r.key, task)
}

// Side returns what the rollout's tool servers and user left
// (Server.Side). Read it before Release.
func (r *Registration) Side() (sidecar.Side, bool) {
	if !r.live() {
		return sidecar.Side{}, false
	}
	return r.m.srv.Side(r.key)
}
