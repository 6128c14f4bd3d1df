package interception

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/trace"
)

// StateLimit bounds a rollout's shared state, in bytes of JSON.
const StateLimit = 1 << 20

// side is what a rollout shares with the programs beside its harness (MCP
// tool servers, a user simulator) through its server: the state at /state,
// the task at /task, and the user's turns posted to /user. They
// authenticate with the rollout's secret, as the harness does.
type side struct {
	mu    sync.Mutex
	state json.RawMessage // a JSON object; nil is {}
	task  json.RawMessage // the task as the agent may see it; nil until set
	users []trace.UserTurn
}

// Side is what a rollout's tool servers and user left: the final shared
// state and the user's turns.
type Side struct {
	// State is the rollout's /state at the end, a JSON object; nil when
	// nothing was ever written.
	State json.RawMessage
	// Users are the simulated user's turns, in order.
	Users []trace.UserTurn
}

// sideRoutes are the routes of the programs beside a harness.
func (s *Server) sideRoutes() []route {
	return []route{
		{method: http.MethodGet, path: "/state", serve: s.getState},
		{method: http.MethodPut, path: "/state", serve: s.putState},
		{method: http.MethodPatch, path: "/state", serve: s.patchState},
		{method: http.MethodGet, path: "/task", serve: s.getTask},
		{method: http.MethodPost, path: "/user", serve: s.postUser},
	}
}

// SetTask sets what a rollout's /task answers: the task as its agent may
// see it (tasksets.Task.ForHarness), never its answer, tests or solution.
func (s *Server) SetTask(key string, task json.RawMessage) bool {
	e := s.entry(key)
	if e == nil {
		return false
	}
	e.side.mu.Lock()
	e.side.task = bytes.Clone(task)
	e.side.mu.Unlock()
	return true
}

// Side returns what a rollout's tool servers and user left.
func (s *Server) Side(key string) (Side, bool) {
	e := s.entry(key)
	if e == nil {
		return Side{}, false
	}
	e.side.mu.Lock()
	defer e.side.mu.Unlock()
	return Side{State: bytes.Clone(e.side.state), Users: append([]trace.UserTurn(nil), e.side.users...)}, true
}

func (s *Server) entry(key string) *entry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byKey[key]
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
	_, _ = w.Write([]byte("\n"))
}

func (s *Server) getState(w http.ResponseWriter, _ *http.Request, e *entry, _ dialects.Dialect) {
	e.side.mu.Lock()
	state := e.side.state
	e.side.mu.Unlock()
	if state == nil {
		state = json.RawMessage("{}")
	}
	writeJSON(w, http.StatusOK, state)
}

// readObject reads a request body that must be a JSON object whose
// numbers every consumer can decode (finite doubles), answering in d's
// shape when it is not.
func (s *Server) readObject(w http.ResponseWriter, r *http.Request, d dialects.Dialect) (map[string]json.RawMessage, bool) {
	body, status, code, msg := readBounded(w, r, min(s.cfg.MaxBodyBytes, StateLimit), s.cfg.BodyReadTimeout)
	if status != 0 {
		d.WriteError(w, status, code, msg)
		return nil, false
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		d.WriteError(w, http.StatusBadRequest, "invalid_state", "The body must be a JSON object.")
		return nil, false
	}
	if err := json.Unmarshal(body, new(map[string]any)); err != nil {
		d.WriteError(w, http.StatusBadRequest, "invalid_state", "The body's numbers must be finite doubles.")
		return nil, false
	}
	return obj, true
}

// putState replaces the rollout's state with the body, a JSON object.
func (s *Server) putState(w http.ResponseWriter, r *http.Request, e *entry, d dialects.Dialect) {
	obj, ok := s.readObject(w, r, d)
	if !ok {
		return
	}
	s.storeState(w, e, d, func(map[string]json.RawMessage) map[string]json.RawMessage { return obj })
}

// patchState merges the body into the rollout's state as a JSON merge
// patch (RFC 7386): a null removes a member, an object merges into an
// object, anything else replaces.
func (s *Server) patchState(w http.ResponseWriter, r *http.Request, e *entry, d dialects.Dialect) {
	patch, ok := s.readObject(w, r, d)
	if !ok {
		return
	}
	s.storeState(w, e, d, func(cur map[string]json.RawMessage) map[string]json.RawMessage {
		return mergePatch(cur, patch)
	})
}

// storeState replaces the state with change(state), atomically, and
// answers with the new state.
func (s *Server) storeState(w http.ResponseWriter, e *entry, d dialects.Dialect, change func(map[string]json.RawMessage) map[string]json.RawMessage) {
	e.side.mu.Lock()
	cur := map[string]json.RawMessage{}
	if e.side.state != nil {
		_ = json.Unmarshal(e.side.state, &cur) // written by this function: an object
	}
	next, err := json.Marshal(change(cur))
	if err != nil {
		e.side.mu.Unlock()
		d.WriteError(w, http.StatusBadRequest, "invalid_state", "The state cannot be written as JSON.")
		return
	}
	if len(next) > StateLimit {
		e.side.mu.Unlock()
		d.WriteError(w, http.StatusRequestEntityTooLarge, "state_too_large", "The state would be larger than 1 MiB.")
		return
	}
	e.side.state = next
	e.side.mu.Unlock()
	writeJSON(w, http.StatusOK, next)
}

// mergePatch applies an RFC 7386 merge patch to an object.
func mergePatch(target, patch map[string]json.RawMessage) map[string]json.RawMessage {
	if target == nil {
		target = map[string]json.RawMessage{}
	}
	for k, v := range patch {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			delete(target, k)
			continue
		}
		var sub map[string]json.RawMessage
		if json.Unmarshal(v, &sub) == nil && sub != nil {
			var cur map[string]json.RawMessage
			if old, ok := target[k]; !ok || json.Unmarshal(old, &cur) != nil {
				cur = nil
			}
			merged, _ := json.Marshal(mergePatch(cur, sub))
			target[k] = merged
			continue
		}
		target[k] = v
	}
	return target
}

// getTask answers with the rollout's task as its agent may see it: its
// prompt, messages, info and tools, never its reference answer (which
// would be the agent's to read too).
func (s *Server) getTask(w http.ResponseWriter, _ *http.Request, e *entry, d dialects.Dialect) {
	e.side.mu.Lock()
	task := e.side.task
	e.side.mu.Unlock()
	if task == nil {
		d.WriteError(w, http.StatusNotFound, "task_unknown", "The rollout's task is not known yet.")
		return
	}
	writeJSON(w, http.StatusOK, task)
}

// userPost is a user turn as the harness posts it: the turn of a command
// it ran, or the conversation for the task's persona to answer.
type userPost struct {
	Content  *string          `json:"content"`
	Done     bool             `json:"done"`
	Messages []personaMessage `json:"messages"`
}

// postUser records a turn of the simulated user: {"content": "...",
// "done": false} from a user command the harness ran, or, for a task
// whose user is a persona, {"messages": [...]}, the conversation the
// persona answers through the server's upstream. It answers with the
// turn: {"index", "content", "done"}.
func (s *Server) postUser(w http.ResponseWriter, r *http.Request, e *entry, d dialects.Dialect) {
	body, status, code, msg := readBounded(w, r, min(s.cfg.MaxBodyBytes, StateLimit), s.cfg.BodyReadTimeout)
	if status != 0 {
		d.WriteError(w, status, code, msg)
		return
	}
	var p userPost
	if err := json.Unmarshal(body, &p); err != nil || (p.Content == nil && p.Messages == nil) {
		d.WriteError(w, http.StatusBadRequest, "invalid_user_turn", `The body must be a JSON object with a "content" string or the "messages" for the persona.`)
		return
	}
	var call *trace.Turn
	if p.Content == nil {
		text, done, turn, err := s.persona(r.Context(), e, p.Messages)
		switch {
		case errors.Is(err, errNoPersona):
			d.WriteError(w, http.StatusBadRequest, "no_persona", "The rollout's task has no persona user: post the user's \"content\".")
			return
		case errors.Is(err, errPersonaTurns):
			d.WriteError(w, http.StatusTooManyRequests, "user_turns_used", "The persona has had its max_turns turns.")
			return
		case err != nil:
			d.WriteError(w, http.StatusBadGateway, "persona_failed", "The persona's model call failed: "+err.Error())
			return
		}
		p.Content, p.Done, call = &text, done, turn
	}
	e.mu.Lock()
	after := e.begun
	e.mu.Unlock()
	e.side.mu.Lock()
	turn := trace.UserTurn{Index: len(e.side.users) + 1, AfterTurn: after, Content: *p.Content, Done: p.Done, At: time.Now().UTC(), Call: call}
	e.side.users = append(e.side.users, turn)
	e.side.mu.Unlock()
	out, _ := json.Marshal(map[string]any{"index": turn.Index, "content": turn.Content, "done": turn.Done})
	writeJSON(w, http.StatusOK, out)
}

// SetTask sets what a held rollout's /task answers (Server.SetTask).
func (p *Pool) SetTask(key string, task json.RawMessage) bool {
	m, ok := p.member(key)
	return ok && m.srv.SetTask(key, task)
}

// Side returns what a held rollout's tool servers and user left
// (Server.Side). Read it before Release.
func (p *Pool) Side(key string) (Side, bool) {
	m, ok := p.member(key)
	if !ok {
		return Side{}, false
	}
	return m.srv.Side(key)
}
