package gateway

import (
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
	var req RegisterRequest
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			writeError(w, http.StatusBadRequest, "register body: "+err.Error())
			return
		}
	}
	switch {
	case req.Model == "":
		writeError(w, http.StatusBadRequest, "register: model is required")
		return
	case req.MaxTurns < 0 || req.MaxTokens < 0 || req.MaxSeqLen < 0 || req.TTL < 0 || req.TopLogprobs < 0:
		writeError(w, http.StatusBadRequest, "register: max_turns, max_tokens, max_seq_len, ttl and top_logprobs must not be negative")
		return
	}
	key := KeyPrefix + id
	if g.pool.Held(key) {
		writeError(w, http.StatusConflict, "rollout "+id+" is already registered")
		return
	}
	if g.cfg.Slots != nil && !g.cfg.Slots.TryTake(key) {
		writeError(w, http.StatusServiceUnavailable, "register: the worker is at capacity")
		return
	}
	if req.MaxSeqLen > 0 && (req.Sampling.MaxTokens == nil || *req.Sampling.MaxTokens > req.MaxSeqLen) {
		capped := req.MaxSeqLen
		req.Sampling.MaxTokens = &capped
	}
	secret, err := g.pool.Acquire(r.Context(), key, req)
	if err != nil {
		g.giveSlot(key)
		writeError(w, http.StatusServiceUnavailable, "register: "+err.Error())
		return
	}
	base, err := g.pool.Expose(r.Context(), key)
	if err != nil {
		g.pool.Release(key)
		g.giveSlot(key)
		writeError(w, http.StatusBadGateway, "register: "+err.Error())
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
	g.mu.Lock()
	g.expires[id] = expires
	g.mu.Unlock()
	writeJSON(w, http.StatusOK, Registration{RolloutID: id, BaseURL: base, OpenAIBaseURL: base + "/v1",
		APIKey: secret, ExpiresAt: expires.UTC()})
}

func (g *Gateway) giveSlot(key string) {
	if g.cfg.Slots != nil {
		g.cfg.Slots.Give(key)
	}
}

// end ends a gateway rollout: its calls stop, its slot and its unit of
// capacity are given back, and its turns are returned.
func (g *Gateway) end(id string) ([]trace.Turn, bool) {
	key := KeyPrefix + id
	g.mu.Lock()
	delete(g.expires, id)
	g.mu.Unlock()
	turns, ok := g.pool.Finish(key)
	if !ok {
		return nil, false
	}
	g.pool.Release(key)
	g.giveSlot(key)
	return turns, true
}
