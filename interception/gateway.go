package interception

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/trace"
)

// The rollout gateway lets an external trainer run its own agent against a
// rollout: it registers a rollout and gets a base URL and a secret for the
// agent, then fetches the recorded trajectory, then unregisters it.
//
//	POST /v1/rollouts/{id}/register   {"model": "...", "sampling": {...}, "max_turns": 8, ...}
//	GET  /v1/rollouts/{id}/trajectory
//	POST /v1/rollouts/{id}/unregister
//
// Every call presents Config.GatewayToken as a bearer token; without a
// configured token the routes do not exist. They are served by every
// interception server of the pool and, at a stable address, by
// Pool.GatewayHandler, which also serves the rollout's model routes below
// /v1/rollouts/{id}/ (an agent's base URL there is
// {gateway}/v1/rollouts/{id}/v1).
//
// A registration expires after its TTL (Config.GatewayTTL, or the
// register call's ttl), when SweepGateway finds it, so a trainer that
// never unregisters leaks nothing; each one takes a unit of the worker's
// capacity (Config.GatewaySlots) while it lives.
const gatewayPrefix = "/v1/rollouts/"

// GatewayKeyPrefix starts the pool keys of gateway rollouts, so they never
// collide with workflow rollouts (run/epoch/index/k).
const GatewayKeyPrefix = "gateway/"

// DefaultGatewayTTL is how long a gateway registration lives unless the
// register call or Config.GatewayTTL says otherwise.
const DefaultGatewayTTL = 4 * time.Hour

// maxRegisterBytes bounds a register call's body: a model and sampling.
const maxRegisterBytes = 1 << 20

// gatewayActions are the gateway's routes below gatewayPrefix+id.
var gatewayActions = []struct{ name, method string }{
	{"register", http.MethodPost}, {"trajectory", http.MethodGet}, {"unregister", http.MethodPost},
}

var rolloutID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// SlotCounter is the worker's capacity as the gateway uses it: a
// registration takes a unit for its key, or is refused when none is free,
// and gives it back when it ends.
type SlotCounter interface {
	TryTake(key string) bool
	Give(key string)
}

// RegisterRequest is the body of POST /v1/rollouts/{id}/register.
type RegisterRequest struct {
	Model    string            `json:"model"`
	Sampling dialects.Sampling `json:"sampling"`
	// MaxTurns is the most model calls of the rollout (0: none).
	MaxTurns int `json:"max_turns,omitempty"`
	// MaxTokens is the most tokens, prompt and completion, of all its calls
	// together (0: none).
	MaxTokens int `json:"max_tokens,omitempty"`
	// MaxSeqLen is the most tokens, prompt and completion, of one call
	// (0: none): each call's max tokens is capped at it, and once a call
	// reached it the calls after it are refused.
	MaxSeqLen int `json:"max_seq_len,omitempty"`
	// TTL is how long the registration lives unless unregistered: seconds,
	// or a duration such as "90m". Zero is the gateway's default.
	TTL TTL `json:"ttl,omitempty"`
	// TraceTokens asks a chat upstream for token ids and logprobs, which
	// the trajectory then holds per turn; TopLogprobs alternatives each.
	TraceTokens bool `json:"trace_tokens,omitempty"`
	TopLogprobs int  `json:"top_logprobs,omitempty"`
}

// TTL is a registration's lifetime: in JSON a number of seconds or a Go
// duration string.
type TTL time.Duration

// UnmarshalJSON reads seconds or a duration string.
func (t *TTL) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("ttl: %w", err)
		}
		*t = TTL(d)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return errors.New("ttl: want seconds or a duration such as \"2h\"")
	}
	*t = TTL(time.Duration(secs * float64(time.Second)))
	return nil
}

// MarshalJSON writes seconds.
func (t TTL) MarshalJSON() ([]byte, error) {
	return []byte(strconv.FormatFloat(time.Duration(t).Seconds(), 'f', -1, 64)), nil
}

// Registration answers a register call: what the agent needs.
type Registration struct {
	RolloutID string `json:"rollout_id"`
	// BaseURL is the server root (ANTHROPIC_BASE_URL); OpenAIBaseURL adds /v1.
	BaseURL       string `json:"base_url"`
	OpenAIBaseURL string `json:"openai_base_url"`
	// APIKey is the rollout's secret, for the agent to send as its API key.
	APIKey string `json:"api_key"`
	// ExpiresAt is when the registration ends unless unregistered first.
	ExpiresAt time.Time `json:"expires_at"`
}

// Trajectory answers trajectory and unregister calls.
type Trajectory struct {
	RolloutID string       `json:"rollout_id"`
	Turns     []trace.Turn `json:"turns"`
	// Prompt is the conversation's first request; Completion what came
	// after it: the later requests' new messages and the last answer.
	Prompt     []dialects.Message `json:"prompt"`
	Completion []dialects.Message `json:"completion"`
	// Tokens is each turn's token data, when the registration traces
	// tokens; the turns themselves then hold none.
	Tokens []TurnTokens `json:"tokens,omitempty"`
	// IsTruncated says a limit cut the rollout (Limit names it) or a turn
	// stopped at its max tokens (finish reason length).
	IsTruncated bool   `json:"is_truncated"`
	Limit       string `json:"limit,omitempty"`
}

// TurnTokens is one turn's token data in a Trajectory.
type TurnTokens struct {
	Turn         int    `json:"turn"`
	FinishReason string `json:"finish_reason,omitempty"`
	*dialects.Tokens
}

// trajectoryOf builds the trajectory of turns, a copy of a rollout's own:
// their token data moves to the trajectory's Tokens.
func trajectoryOf(id string, turns []trace.Turn) Trajectory {
	tr := Trajectory{RolloutID: id, Turns: turns, Prompt: []dialects.Message{}, Completion: []dialects.Message{}}
	if tr.Turns == nil {
		tr.Turns = []trace.Turn{}
	}
	var answered []trace.Turn
	for i, t := range turns {
		if t.Limit != "" && tr.Limit == "" {
			tr.Limit = t.Limit
		}
		if t.Limit != "" || t.Response.FinishReason == dialects.FinishLength {
			tr.IsTruncated = true
		}
		if t.Tokens != nil {
			tr.Tokens = append(tr.Tokens, TurnTokens{Turn: t.Index, FinishReason: t.Response.FinishReason, Tokens: t.Tokens})
			turns[i].Tokens = nil // once is enough: in Tokens
		}
		if t.Status/100 == 2 && len(t.Request.Messages) > 0 {
			answered = append(answered, t)
		}
	}
	if len(answered) == 0 {
		return tr
	}
	first, last := answered[0], answered[len(answered)-1]
	tr.Prompt = first.Request.Messages
	if n := len(first.Request.Messages); len(last.Request.Messages) >= n {
		tr.Completion = append(tr.Completion, last.Request.Messages[n:]...)
	}
	tr.Completion = append(tr.Completion, last.Response.Message)
	return tr
}

// gatewayState is the pool's gateway registrations, by rollout id.
type gatewayState struct {
	mu      sync.Mutex
	expires map[string]time.Time
}

func (p *Pool) now() time.Time {
	if p.cfg.Now != nil {
		return p.cfg.Now()
	}
	return time.Now()
}

// gateway serves the gateway routes and reports whether r was one.
func (s *Server) gateway(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.pool == nil {
		return false
	}
	return s.cfg.pool.serveGateway(w, r, false)
}

// GatewayHandler serves the gateway at an address of its own (the worker's
// --gateway-addr): the gateway routes, the registered rollouts' model
// routes below /v1/rollouts/{id}/, and /healthz. Without a gateway token
// it answers 404 to everything but /healthz.
func (p *Pool) GatewayHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			healthz(w, r)
			return
		}
		if !p.serveGateway(w, r, true) {
			gatewayError(w, http.StatusNotFound, "unknown gateway route")
		}
	})
}

// serveGateway serves r when it is a gateway route; standalone also serves
// the rollouts' model routes.
func (p *Pool) serveGateway(w http.ResponseWriter, r *http.Request, standalone bool) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, gatewayPrefix)
	if !ok || p.cfg.GatewayToken == "" {
		return false
	}
	id, action, ok := strings.Cut(rest, "/")
	if standalone && ok && rolloutID.MatchString(id) && strings.HasPrefix(action, "v1/") {
		p.serveRolloutModel(w, r, id, "/"+action)
		return true
	}
	var want string
	for _, a := range gatewayActions {
		if a.name == action {
			want = a.method
		}
	}
	switch {
	case !ok || want == "" || !rolloutID.MatchString(id):
		gatewayError(w, http.StatusNotFound, "unknown gateway route")
	case !p.gatewayAuthorized(r):
		gatewayError(w, http.StatusUnauthorized, "missing or wrong gateway token")
	case r.Method != want:
		gatewayError(w, http.StatusMethodNotAllowed, "method "+r.Method+" is not allowed on "+action)
	default:
		p.gatewayRoute(w, r, id, action, standalone)
	}
	return true
}

// serveRolloutModel serves a model call of a gateway rollout, made at the
// gateway's address, on the rollout's own server: authenticated by the
// rollout's secret and recorded alike.
func (p *Pool) serveRolloutModel(w http.ResponseWriter, r *http.Request, id, path string) {
	m, ok := p.member(GatewayKeyPrefix + id)
	if !ok {
		callerDialect(r.Header).WriteError(w, http.StatusNotFound, "unknown_rollout", "rollout "+id+" is not registered")
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path, r2.URL.RawPath = path, ""
	m.srv.ServeHTTP(w, r2)
}

func (p *Pool) gatewayAuthorized(r *http.Request) bool {
	v := r.Header.Get("Authorization")
	if len(v) < 7 || !strings.EqualFold(v[:7], "bearer ") {
		return false
	}
	got, want := sha256.Sum256([]byte(strings.TrimSpace(v[7:]))), sha256.Sum256([]byte(p.cfg.GatewayToken))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

func (p *Pool) gatewayRoute(w http.ResponseWriter, r *http.Request, id, action string, standalone bool) {
	key := GatewayKeyPrefix + id
	switch action {
	case "register":
		p.register(w, r, id, standalone)
	case "trajectory":
		turns, ok := p.Turns(key)
		if !ok {
			gatewayError(w, http.StatusNotFound, "rollout "+id+" is not registered")
			return
		}
		gatewayJSON(w, http.StatusOK, trajectoryOf(id, turns))
	case "unregister":
		turns, ok := p.endGateway(id)
		if !ok {
			gatewayError(w, http.StatusNotFound, "rollout "+id+" is not registered")
			return
		}
		gatewayJSON(w, http.StatusOK, trajectoryOf(id, turns))
	}
}

// register serves a register call.
func (p *Pool) register(w http.ResponseWriter, r *http.Request, id string, standalone bool) {
	body, status, _, msg := readBounded(w, r, maxRegisterBytes, p.cfg.BodyReadTimeout)
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
	switch {
	case req.Model == "":
		gatewayError(w, http.StatusBadRequest, "register: model is required")
		return
	case req.MaxTurns < 0 || req.MaxTokens < 0 || req.MaxSeqLen < 0 || req.TTL < 0 || req.TopLogprobs < 0:
		gatewayError(w, http.StatusBadRequest, "register: max_turns, max_tokens, max_seq_len, ttl and top_logprobs must not be negative")
		return
	}
	key := GatewayKeyPrefix + id
	if _, ok := p.Slot(key); ok {
		gatewayError(w, http.StatusConflict, "rollout "+id+" is already registered")
		return
	}
	if p.cfg.GatewaySlots != nil && !p.cfg.GatewaySlots.TryTake(key) {
		gatewayError(w, http.StatusServiceUnavailable, "register: the worker is at capacity")
		return
	}
	ro := Rollout{Key: key, Model: req.Model, Sampling: req.Sampling,
		Limits: Limits{Turns: req.MaxTurns, Tokens: req.MaxTokens, SeqLen: req.MaxSeqLen}}
	if req.MaxSeqLen > 0 && (ro.Sampling.MaxTokens == nil || *ro.Sampling.MaxTokens > req.MaxSeqLen) {
		capped := req.MaxSeqLen
		ro.Sampling.MaxTokens = &capped
	}
	if req.TraceTokens {
		ro.Tokens = &dialects.TokenRequest{TopLogprobs: req.TopLogprobs}
	}
	slot, err := p.Acquire(r.Context(), ro)
	if err != nil {
		p.giveGatewaySlot(key)
		gatewayError(w, http.StatusServiceUnavailable, "register: "+err.Error())
		return
	}
	base, err := p.Expose(r.Context(), key)
	if err != nil {
		p.Release(key)
		p.giveGatewaySlot(key)
		gatewayError(w, http.StatusBadGateway, "register: "+err.Error())
		return
	}
	if standalone {
		base = "http://" + r.Host + gatewayPrefix + id
	}
	ttl := time.Duration(req.TTL)
	if ttl == 0 {
		ttl = p.cfg.GatewayTTL
	}
	expires := p.now().Add(ttl)
	p.gw.mu.Lock()
	if p.gw.expires == nil {
		p.gw.expires = make(map[string]time.Time)
	}
	p.gw.expires[id] = expires
	p.gw.mu.Unlock()
	gatewayJSON(w, http.StatusOK, Registration{RolloutID: id, BaseURL: base, OpenAIBaseURL: base + "/v1",
		APIKey: slot.Secret, ExpiresAt: expires.UTC()})
}

func (p *Pool) giveGatewaySlot(key string) {
	if p.cfg.GatewaySlots != nil {
		p.cfg.GatewaySlots.Give(key)
	}
}

// endGateway ends a gateway rollout: its calls stop, its slot and its unit
// of capacity are given back, and its turns are returned.
func (p *Pool) endGateway(id string) ([]trace.Turn, bool) {
	key := GatewayKeyPrefix + id
	p.gw.mu.Lock()
	delete(p.gw.expires, id)
	p.gw.mu.Unlock()
	turns, ok := p.Finish(key)
	if !ok {
		return nil, false
	}
	p.Release(key)
	p.giveGatewaySlot(key)
	return turns, true
}

// SweepGateway ends the gateway registrations whose TTL has passed, as
// unregister does, and returns their ids.
func (p *Pool) SweepGateway() []string {
	now := p.now()
	p.gw.mu.Lock()
	var expired []string
	for id, at := range p.gw.expires {
		if !now.Before(at) {
			expired = append(expired, id)
		}
	}
	p.gw.mu.Unlock()
	sort.Strings(expired)
	for _, id := range expired {
		p.endGateway(id)
		p.cfg.Logger.Info("gateway registration expired", "rollout", id)
	}
	return expired
}

// DefaultGatewaySweep is how often the sweeper looks for expired gateway
// registrations.
const DefaultGatewaySweep = time.Minute

// StartGatewaySweeper sweeps expired gateway registrations every interval
// (DefaultGatewaySweep when 0) until the pool closes.
func (p *Pool) StartGatewaySweeper(every time.Duration) {
	if every <= 0 {
		every = DefaultGatewaySweep
	}
	t := time.NewTicker(every)
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		defer t.Stop()
		for {
			select {
			case <-p.ctx.Done():
				return
			case <-t.C:
				p.SweepGateway()
			}
		}
	}()
}

func gatewayJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func gatewayError(w http.ResponseWriter, status int, msg string) {
	gatewayJSON(w, status, map[string]any{"error": map[string]string{"message": msg, "type": "gateway_error"}})
}
