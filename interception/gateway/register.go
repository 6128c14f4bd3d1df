package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/trace"
)

// maxRegisterBytes bounds a register call's body: a model and sampling.
const maxRegisterBytes = 1 << 20

// RegisterRequest is the body of POST /v1/rollouts/{id}/register.
type RegisterRequest struct {
	Model    string            `json:"model"`
	Sampling dialects.Sampling `json:"sampling"`
	// SamplingParams is Sampling by prime-rl's name: a register call sends
	// one or the other. register moves it to Sampling.
	SamplingParams *dialects.Sampling `json:"sampling_params,omitempty"`
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
	// TokenIn sends a chat call that extends an earlier turn with its
	// prompt as token ids (evalflow's --token-in); it implies TraceTokens.
	TokenIn bool `json:"token_in,omitempty"`
	// PolicyVersion is the trainer's policy version when the rollout
	// starts: each turn's, unless the upstream reports its own.
	PolicyVersion *int64 `json:"policy_version,omitempty"`
	// MaxOffPolicySteps bounds how many versions a turn may lag the
	// trainer's: a trajectory read at a later policy_version is marked
	// stale past it. Nil: no bound.
	MaxOffPolicySteps *int `json:"max_off_policy_steps,omitempty"`
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

// register serves a register call.
func (g *Gateway) register(w http.ResponseWriter, r *http.Request, id string, standalone bool) {
	body, status, _, msg := g.pool.ReadBody(w, r, maxRegisterBytes)
	if status != 0 {
		writeError(w, status, "register body: "+msg)
		return
	}
	req, err := decodeRegister(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.MaxSeqLen > 0 && (req.Sampling.MaxTokens == nil || *req.Sampling.MaxTokens > req.MaxSeqLen) {
		capped := req.MaxSeqLen
		req.Sampling.MaxTokens = &capped
	}
	reg, base, status, err := g.open(r.Context(), id, req)
	if err != nil {
		writeError(w, status, err.Error())
		return
	}
	if standalone {
		base = "http://" + r.Host + Prefix + id
	}
	ttl := time.Duration(req.TTL)
	if ttl == 0 {
		ttl = g.cfg.TTL
	}
	expires := g.cfg.Now().Add(ttl)
	reg.expires, reg.maxOffPolicy = expires, req.MaxOffPolicySteps
	g.mu.Lock()
	g.regs[id] = reg
	g.mu.Unlock()
	writeJSON(w, http.StatusOK, Registration{RolloutID: id, BaseURL: base, OpenAIBaseURL: base + "/v1",
		APIKey: reg.secret, ExpiresAt: expires.UTC()})
}

// open takes what rollout id needs as req registers it: the id, a unit of
// the worker's capacity, a slot, its server exposed. It returns what the
// gateway keeps of it, but its expiry, and the server's base URL; or it
// gives back what it took and says how to answer.
func (g *Gateway) open(ctx context.Context, id string, req RegisterRequest) (reg registration, base string, status int, err error) {
	if !g.reserve(id) {
		return reg, "", http.StatusConflict, fmt.Errorf("rollout %s is already registered", id)
	}
	key := KeyPrefix + id
	reg.give = func() {}
	defer func() {
		if err != nil {
			g.pool.Release(key)
			reg.give()
			g.forget(id)
		}
	}()
	if g.cfg.Slots != nil {
		give, ok := g.cfg.Slots.TryTake()
		if !ok {
			return reg, "", http.StatusServiceUnavailable, errors.New("register: the worker is at capacity")
		}
		reg.give = give
	}
	if reg.secret, err = g.pool.Acquire(ctx, key, req); err != nil {
		return reg, "", http.StatusServiceUnavailable, fmt.Errorf("register: %w", err)
	}
	if base, err = g.pool.Expose(ctx, key); err != nil {
		return reg, "", http.StatusBadGateway, fmt.Errorf("register: %w", err)
	}
	return reg, base, 0, nil
}

// decodeRegister reads and checks a register call's body. Unknown fields
// are ignored.
func decodeRegister(body []byte) (RegisterRequest, error) {
	var req RegisterRequest
	if len(body) == 0 {
		return req, errors.New("register: model is required")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return req, fmt.Errorf("register body: %w", err)
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return req, fmt.Errorf("register body: %w", err)
	}
	sampling, hasSampling := fields["sampling"]
	params, hasParams := fields["sampling_params"]
	if hasParams {
		sampling = params
	}
	// Sampling that asks for log probabilities (OpenAI's logprobs and
	// top_logprobs, vLLM's return_token_ids), as a trainer's does, traces
	// tokens.
	var asks struct {
		Logprobs       bool `json:"logprobs"`
		TopLogprobs    int  `json:"top_logprobs"`
		ReturnTokenIDs bool `json:"return_token_ids"`
	}
	if json.Unmarshal(sampling, &asks) == nil && (asks.Logprobs || asks.ReturnTokenIDs || asks.TopLogprobs > 0) {
		req.TraceTokens = true
		if req.TopLogprobs == 0 {
			req.TopLogprobs = asks.TopLogprobs
		}
	}
	switch {
	case hasSampling && hasParams:
		return req, errors.New("register: sampling and sampling_params are the same parameters by two names: send one of them")
	case req.Model == "":
		return req, errors.New("register: model is required")
	case req.MaxTurns < 0 || req.MaxTokens < 0 || req.MaxSeqLen < 0 || req.TTL < 0 || req.TopLogprobs < 0:
		return req, errors.New("register: max_turns, max_tokens, max_seq_len, ttl and top_logprobs must not be negative")
	case req.MaxOffPolicySteps != nil && *req.MaxOffPolicySteps < 0:
		return req, errors.New("register: max_off_policy_steps must not be negative (0: every turn on the trainer's current version)")
	case req.PolicyVersion != nil && *req.PolicyVersion < 0:
		return req, errors.New("register: policy_version must not be negative")
	}
	if req.SamplingParams != nil {
		req.Sampling, req.SamplingParams = *req.SamplingParams, nil
	}
	return req, nil
}

// reserve takes id for a register call, unless another holds it.
func (g *Gateway) reserve(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.regs[id]; ok {
		return false
	}
	g.regs[id] = registration{registering: true}
	return true
}

// forget lets go of the id a failed register call reserved.
func (g *Gateway) forget(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.regs, id)
}

// end ends a gateway rollout: its calls stop, its slot and its unit of
// capacity are given back, and its turns are returned. A rollout still
// registering is not registered yet.
func (g *Gateway) end(id string) ([]trace.Turn, bool) {
	key := KeyPrefix + id
	g.mu.Lock()
	reg, ok := g.regs[id]
	if ok && !reg.registering {
		delete(g.regs, id)
	}
	g.mu.Unlock()
	if !ok || reg.registering {
		return nil, false
	}
	turns, ok := g.pool.Finish(key)
	g.pool.Release(key)
	reg.give()
	return turns, ok
}
