package interception

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/trace"
)

// The rollout gateway lets an external trainer run its own agent against a
// rollout: it registers a rollout and gets a base URL and a secret for the
// agent, then fetches the recorded trajectory, then unregisters it.
//
//	POST /v1/rollouts/{id}/register   {"model": "...", "sampling": {...}}
//	GET  /v1/rollouts/{id}/trajectory
//	POST /v1/rollouts/{id}/unregister
//
// Every call presents Config.GatewayToken as a bearer token; without a
// configured token the routes do not exist.
const gatewayPrefix = "/v1/rollouts/"

// GatewayKeyPrefix starts the pool keys of gateway rollouts, so they never
// collide with workflow rollouts (run/epoch/index/k).
const GatewayKeyPrefix = "gateway/"

// maxRegisterBytes bounds a register call's body: a model and sampling.
const maxRegisterBytes = 1 << 20

// gatewayActions are the gateway's routes below gatewayPrefix+id.
var gatewayActions = []struct{ name, method string }{
	{"register", http.MethodPost}, {"trajectory", http.MethodGet}, {"unregister", http.MethodPost},
}

var rolloutID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// RegisterRequest is the body of POST /v1/rollouts/{id}/register.
type RegisterRequest struct {
	Model    string            `json:"model"`
	Sampling dialects.Sampling `json:"sampling"`
}

// Registration answers a register call: what the agent needs.
type Registration struct {
	RolloutID string `json:"rollout_id"`
	// BaseURL is the server root (ANTHROPIC_BASE_URL); OpenAIBaseURL adds /v1.
	BaseURL       string `json:"base_url"`
	OpenAIBaseURL string `json:"openai_base_url"`
	// APIKey is the rollout's secret, for the agent to send as its API key.
	APIKey string `json:"api_key"`
}

// Trajectory answers trajectory and unregister calls.
type Trajectory struct {
	RolloutID string       `json:"rollout_id"`
	Turns     []trace.Turn `json:"turns"`
}

// gateway serves the gateway routes and reports whether r was one.
func (s *Server) gateway(w http.ResponseWriter, r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, gatewayPrefix)
	if !ok || s.cfg.GatewayToken == "" || s.cfg.pool == nil {
		return false
	}
	id, action, ok := strings.Cut(rest, "/")
	var want string
	for _, a := range gatewayActions {
		if a.name == action {
			want = a.method
		}
	}
	switch {
	case !ok || want == "" || !rolloutID.MatchString(id):
		gatewayError(w, http.StatusNotFound, "unknown gateway route")
	case !s.gatewayAuthorized(r):
		gatewayError(w, http.StatusUnauthorized, "missing or wrong gateway token")
	case r.Method != want:
		gatewayError(w, http.StatusMethodNotAllowed, "method "+r.Method+" is not allowed on "+action)
	default:
		s.gatewayRoute(w, r, id, action)
	}
	return true
}

func (s *Server) gatewayAuthorized(r *http.Request) bool {
	v := r.Header.Get("Authorization")
	if len(v) < 7 || !strings.EqualFold(v[:7], "bearer ") {
		return false
	}
	got, want := sha256.Sum256([]byte(strings.TrimSpace(v[7:]))), sha256.Sum256([]byte(s.cfg.GatewayToken))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

func (s *Server) gatewayRoute(w http.ResponseWriter, r *http.Request, id, action string) {
	p, key := s.cfg.pool, GatewayKeyPrefix+id
	switch action {
	case "register":
		body, status, _, msg := readBounded(w, r, maxRegisterBytes, s.cfg.BodyReadTimeout)
		if status != 0 {
			gatewayError(w, status, "register body: "+msg)
			return
		}
		var req RegisterRequest
		if len(body) > 0 {
			if err := json.Unmarshal(body, &req); err != nil {
				gatewayError(w, http.StatusBadRequest, "register body: "+err.Error())
				return
			}
		}
		if req.Model == "" {
			gatewayError(w, http.StatusBadRequest, "register: model is required")
			return
		}
		if _, ok := p.Slot(key); ok {
			gatewayError(w, http.StatusConflict, "rollout "+id+" is already registered")
			return
		}
		slot, err := p.Acquire(r.Context(), Rollout{Key: key, Model: req.Model, Sampling: req.Sampling})
		if err != nil {
			gatewayError(w, http.StatusServiceUnavailable, "register: "+err.Error())
			return
		}
		base, err := p.Expose(r.Context(), key)
		if err != nil {
			p.Release(key)
			gatewayError(w, http.StatusBadGateway, "register: "+err.Error())
			return
		}
		gatewayJSON(w, http.StatusOK, Registration{RolloutID: id, BaseURL: base, OpenAIBaseURL: base + "/v1", APIKey: slot.Secret})
	case "trajectory":
		turns, ok := p.Turns(key)
		if !ok {
			gatewayError(w, http.StatusNotFound, "rollout "+id+" is not registered")
			return
		}
		gatewayJSON(w, http.StatusOK, Trajectory{RolloutID: id, Turns: nonNil(turns)})
	case "unregister":
		turns, ok := p.Finish(key)
		if !ok {
			gatewayError(w, http.StatusNotFound, "rollout "+id+" is not registered")
			return
		}
		p.Release(key)
		gatewayJSON(w, http.StatusOK, Trajectory{RolloutID: id, Turns: nonNil(turns)})
	}
}

func nonNil(t []trace.Turn) []trace.Turn {
	if t == nil {
		return []trace.Turn{}
	}
	return t
}

func gatewayJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func gatewayError(w http.ResponseWriter, status int, msg string) {
	gatewayJSON(w, status, map[string]any{"error": map[string]string{"message": msg, "type": "gateway_error"}})
}
