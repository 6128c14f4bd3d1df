// Package sidecar serves the routes of the programs beside a rollout's
// harness (MCP tool servers, a simulated user) on the interception server
// the harness calls: the rollout's shared state at /state, its task at
// /task, and the user's turns at /user, answered by the task's persona
// when it has one. They authenticate with the rollout's secret, as the
// harness does, and their errors come in the caller's dialect.
package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/trace"
)

// Proxy is what the side routes need of the interception server that
// serves them.
type Proxy interface {
	// Authenticate finds the rollout whose secret r carries and the dialect
	// r's errors are answered in. Without a valid secret it answers r
	// itself (401) and returns false.
	Authenticate(w http.ResponseWriter, r *http.Request) (Rollout, dialects.Dialect, bool)
	// ReadBody reads r's body, at most limit bytes, or says how to answer
	// instead: a status other than 0, with an error code and message.
	ReadBody(w http.ResponseWriter, r *http.Request, limit int64) (body []byte, status int, code, msg string)
	// Ask sends turn.Request to the rollout's user providers (the upstream
	// unless its run names others), fills in the rest of the turn but its
	// latency, and returns the answer's text.
	Ask(ctx context.Context, ro Rollout, turn *trace.Turn) (string, error)
}

// Rollout is a rollout as its side routes see it.
type Rollout interface {
	// Model is the rollout's model, which its persona answers with.
	Model() string
	// Begun is how many model calls the rollout has begun, the turn a user
	// turn comes after.
	Begun() int
	// State is what the rollout shares, kept with it.
	State() *State
}

// Handler serves the side routes.
type Handler struct {
	proxy Proxy
	limit int64 // of a body
	mux   *http.ServeMux
}

// New returns the side routes of a server whose bodies are bounded by
// maxBodyBytes (and by StateLimit).
func New(p Proxy, maxBodyBytes int64) *Handler {
	h := &Handler{proxy: p, limit: min(maxBodyBytes, StateLimit), mux: http.NewServeMux()}
	for _, rt := range h.routes() {
		h.mux.HandleFunc(rt.pattern, h.authenticated(rt.serve))
	}
	return h
}

// Routes are the side routes as http.ServeMux patterns, "METHOD /path".
// A server routes them to the Handler and answers the other methods on
// their paths itself.
func Routes() []string {
	var ps []string
	for _, rt := range (&Handler{}).routes() {
		ps = append(ps, rt.pattern)
	}
	return ps
}

// route is a side route: a pattern and what serves an authenticated call.
type route struct {
	pattern string
	serve   func(http.ResponseWriter, *http.Request, Rollout, dialects.Dialect)
}

func (h *Handler) routes() []route {
	return []route{
		{"GET /state", h.getState},
		{"PUT /state", h.putState},
		{"PATCH /state", h.patchState},
		{"GET /task", h.getTask},
		{"POST /user", h.postUser},
	}
}

// ServeHTTP serves a side route.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

func (h *Handler) authenticated(serve func(http.ResponseWriter, *http.Request, Rollout, dialects.Dialect)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ro, d, ok := h.proxy.Authenticate(w, r)
		if ok {
			serve(w, r, ro, d)
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
	_, _ = w.Write([]byte("\n"))
}

func (h *Handler) getState(w http.ResponseWriter, _ *http.Request, ro Rollout, _ dialects.Dialect) {
	state, _, _ := ro.State().read()
	if state == nil {
		state = json.RawMessage("{}")
	}
	writeJSON(w, http.StatusOK, state)
}

// readObject reads a request body that must be a JSON object whose
// numbers every consumer can decode (finite doubles), answering in d's
// shape when it is not.
func (h *Handler) readObject(w http.ResponseWriter, r *http.Request, d dialects.Dialect) (map[string]json.RawMessage, bool) {
	body, status, code, msg := h.proxy.ReadBody(w, r, h.limit)
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
func (h *Handler) putState(w http.ResponseWriter, r *http.Request, ro Rollout, d dialects.Dialect) {
	obj, ok := h.readObject(w, r, d)
	if !ok {
		return
	}
	storeState(w, ro.State(), d, func(map[string]json.RawMessage) map[string]json.RawMessage { return obj })
}

// patchState merges the body into the rollout's state as a JSON merge
// patch (RFC 7386): a null removes a member, an object merges into an
// object, anything else replaces.
func (h *Handler) patchState(w http.ResponseWriter, r *http.Request, ro Rollout, d dialects.Dialect) {
	patch, ok := h.readObject(w, r, d)
	if !ok {
		return
	}
	storeState(w, ro.State(), d, func(cur map[string]json.RawMessage) map[string]json.RawMessage {
		return mergePatch(cur, patch)
	})
}

// storeState replaces the state with change(state), atomically, and
// answers with the new state.
func storeState(w http.ResponseWriter, s *State, d dialects.Dialect, change func(map[string]json.RawMessage) map[string]json.RawMessage) {
	s.mu.Lock()
	cur := map[string]json.RawMessage{}
	if s.state != nil {
		_ = json.Unmarshal(s.state, &cur) // written by this function: an object
	}
	next, err := json.Marshal(change(cur))
	if err != nil {
		s.mu.Unlock()
		d.WriteError(w, http.StatusBadRequest, "invalid_state", "The state cannot be written as JSON.")
		return
	}
	if len(next) > StateLimit {
		s.mu.Unlock()
		d.WriteError(w, http.StatusRequestEntityTooLarge, "state_too_large", "The state would be larger than 1 MiB.")
		return
	}
	s.state = next
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, next)
}

// getTask answers with the rollout's task as its agent may see it: its
// prompt, messages, info and tools, never its reference answer (which
// would be the agent's to read too).
func (h *Handler) getTask(w http.ResponseWriter, _ *http.Request, ro Rollout, d dialects.Dialect) {
	_, task, _ := ro.State().read()
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
func (h *Handler) postUser(w http.ResponseWriter, r *http.Request, ro Rollout, d dialects.Dialect) {
	body, status, code, msg := h.proxy.ReadBody(w, r, h.limit)
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
		text, done, turn, err := h.persona(r.Context(), ro, p.Messages)
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
	after := ro.Begun()
	s := ro.State()
	s.mu.Lock()
	turn := trace.UserTurn{Index: len(s.users) + 1, AfterTurn: after, Content: *p.Content, Done: p.Done, At: time.Now().UTC(), Call: call}
	s.users = append(s.users, turn)
	s.mu.Unlock()
	out, _ := json.Marshal(map[string]any{"index": turn.Index, "content": turn.Content, "done": turn.Done})
	writeJSON(w, http.StatusOK, out)
}
