package mock

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/evalflow/evalflow/dialects"
)

// Config configures the mock model. The zero value is a prompt, always-right
// model named "mock".
type Config struct {
	// Model is the name it reports; default "mock".
	Model string
	// Latency is added before each response.
	Latency time.Duration
	// ErrorRate is the fraction (0..1) of final answers deliberately wrong,
	// chosen by a hash of the conversation so the choice is deterministic.
	ErrorRate float64
	// Script optionally names a script file: per task, the turns the model
	// takes (see the package doc). Unscripted conversations get the
	// arithmetic behaviour.
	Script string
	// TokenMerge makes re-tokenizing a conversation differ from the ids
	// sampled: in a prompt (prompt_token_ids, /tokenize of messages) each
	// pair of adjacent ASCII letters of an assistant message is one id, as
	// a BPE vocabulary merges them, while a completion is sampled one id
	// per character. A turn's prompt then does not start with the
	// previous turn's prompt and completion ids.
	TokenMerge bool
	// PolicyVersionHeader names the response header that carries the
	// policy version SetPolicyVersion set (e.g. x-policy-version).
	PolicyVersionHeader string
}

// Model is the mock model's HTTP handler.
type Model struct {
	cfg    Config
	script []scriptEntry
	// policy is the version SetPolicyVersion set; nil before.
	policy atomic.Pointer[int64]
}

var _ http.Handler = (*Model)(nil)

// New validates cfg and loads its script, if any.
func New(cfg Config) (*Model, error) {
	if cfg.Model == "" {
		cfg.Model = "mock"
	}
	if cfg.ErrorRate < 0 || cfg.ErrorRate > 1 || math.IsNaN(cfg.ErrorRate) {
		return nil, fmt.Errorf("mock: error rate %v not in [0, 1]", cfg.ErrorRate)
	}
	if cfg.Latency < 0 {
		return nil, errors.New("mock: negative latency")
	}
	m := &Model{cfg: cfg}
	if cfg.Script != "" {
		s, err := loadScript(cfg.Script)
		if err != nil {
			return nil, err
		}
		m.script = s
	}
	return m, nil
}

// ServeHTTP routes POST /v1/chat/completions, /v1/responses, /v1/messages,
// /v1/messages/count_tokens, GET /v1/models, and vLLM's POST /tokenize
// (also /v1/tokenize) and prime-rl's POST /v1/chat/completions/tokens.
func (m *Model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.policyHeader(w.Header())
	switch r.URL.Path {
	case "/v1/responses", "/v1/messages", "/v1/messages/count_tokens":
		d := dialects.Responses
		if r.URL.Path != "/v1/responses" {
			d = dialects.Anthropic
		}
		if r.Method != http.MethodPost {
			d.WriteError(w, http.StatusMethodNotAllowed, "", "use POST")
			return
		}
		if r.URL.Path == "/v1/messages/count_tokens" {
			m.serveCountTokens(w, r)
			return
		}
		m.serveDialect(w, r, d)
	case "/v1/chat/completions":
		if r.Method != http.MethodPost {
			writeError(w, http.StatusMethodNotAllowed, "use POST")
			return
		}
		m.serveChat(w, r)
	case "/tokenize", "/v1/tokenize", "/v1/chat/completions/tokens":
		if r.Method != http.MethodPost {
			writeError(w, http.StatusMethodNotAllowed, "use POST")
			return
		}
		if r.URL.Path == "/v1/chat/completions/tokens" {
			m.serveChatTokens(w, r)
			return
		}
		m.serveTokenize(w, r)
	case "/v1/models":
		if r.Method != http.MethodGet {
			writeError(w, http.StatusMethodNotAllowed, "use GET")
			return
		}
		m.serveModels(w)
	default:
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	}
}

func (m *Model) serveModels(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []map[string]any{{
			"id":       m.cfg.Model,
			"object":   "model",
			"created":  0,
			"owned_by": "evalflow",
		}},
	})
}

func (m *Model) serveChat(w http.ResponseWriter, r *http.Request) {
	m.serveChatWith(w, r, nil)
}

// serveChatWith answers a chat completions call whose prompt's ids are
// promptTokens when not nil.
func (m *Model) serveChatWith(w http.ResponseWriter, r *http.Request, promptTokens []int32) {
	var req chatRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 32<<20)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid request body: %v", err))
		return
	}
	if len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "messages must not be empty")
		return
	}
	req.promptTokens = promptTokens
	if m.cfg.Latency > 0 {
		t := time.NewTimer(m.cfg.Latency)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
	rep := m.reply(req)
	if rep.status != 0 && rep.status != http.StatusOK {
		writeError(w, rep.status, rep.errMessage)
		return
	}
	if req.Stream {
		m.writeStream(w, req, rep)
		return
	}
	m.writeCompletion(w, req, rep)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client went away; nothing to do
}

// writeError answers in OpenAI's error shape.
func writeError(w http.ResponseWriter, status int, message string) {
	typ := "invalid_request_error"
	switch {
	case status == http.StatusUnauthorized:
		typ = "authentication_error"
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status >= 500:
		typ = "server_error"
	}
	if message == "" {
		message = http.StatusText(status)
	}
	writeJSON(w, status, map[string]any{
		"error": map[string]any{"message": message, "type": typ, "param": nil, "code": nil},
	})
}
