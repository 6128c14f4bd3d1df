// Package interception runs the HTTP servers harnesses send their model calls
// to: it authenticates each call by its rollout's secret, relays it to the
// upstream provider with the run's model and sampling, and records every turn.
package interception

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/trace"
	"github.com/evalflow/evalflow/tunnel"
)

// AttemptsHeader is the response header an Upstream sets to tell how many
// attempts a call took. It is not relayed to the harness.
// providers.AttemptsHeader names the same header.
const AttemptsHeader = "X-Evalflow-Attempts"

// Defaults for Config.
const (
	DefaultMultiplex    = 32
	DefaultMaxBodyBytes = 32 << 20
)

// Upstream sends a request body to a provider route, retrying 429/5xx/connection
// errors before any byte reaches the caller.
type Upstream interface {
	Do(ctx context.Context, path string, body []byte) (*http.Response, error) // path after /v1, e.g. "/chat/completions"
}

// Config configures a Pool and the servers in it. Zero fields take defaults.
type Config struct {
	// Multiplex is how many rollouts share one server.
	Multiplex int
	// Tunnel makes servers reachable; tunnel.Local{} when nil.
	Tunnel   tunnel.Tunnel
	Upstream Upstream
	// MaxBodyBytes bounds request bodies; larger ones get a 413.
	MaxBodyBytes int64
	Logger       *slog.Logger
	// OnTurn, when set, is called with every turn after it is recorded, from
	// the request's goroutine.
	OnTurn func(rolloutKey string, turn trace.Turn)
}

func (c Config) withDefaults() Config {
	if c.Multiplex <= 0 {
		c.Multiplex = DefaultMultiplex
	}
	if c.Tunnel == nil {
		c.Tunnel = tunnel.Local{}
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Rollout is what a server needs to know about a rollout it serves.
type Rollout struct {
	Key      string
	Model    string
	Sampling dialects.Sampling
}

// ErrUnknownRollout is returned for a rollout key that is not registered.
var ErrUnknownRollout = errors.New("unknown rollout")

// Server is one interception HTTP server. Several rollouts share it, told
// apart by their secrets.
type Server struct {
	cfg       Config
	ln        net.Listener
	srv       *http.Server
	host      string // dialable host of the listener
	port      int
	serveErr  chan error
	closeOnce sync.Once
	closeErr  error

	mu       sync.RWMutex
	bySecret map[[sha256.Size]byte]*entry
	byKey    map[string]*entry
}

// entry is a registered rollout and the turns recorded for it.
type entry struct {
	rollout Rollout
	secret  []byte

	mu    sync.Mutex
	turns []trace.Turn
}

func (e *entry) record(t trace.Turn) trace.Turn {
	e.mu.Lock()
	defer e.mu.Unlock()
	t.Index = len(e.turns)
	e.turns = append(e.turns, t)
	return t
}

func (e *entry) snapshot() []trace.Turn {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.turns)
}

// Listen starts a server on cfg.Tunnel's bind host at a free port.
func Listen(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if cfg.Upstream == nil {
		return nil, errors.New("interception: no upstream configured")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Tunnel.BindHost(), "0"))
	if err != nil {
		return nil, fmt.Errorf("interception listen: %w", err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	s := &Server{
		cfg:      cfg,
		ln:       ln,
		host:     host,
		port:     addr.Port,
		serveErr: make(chan error, 1),
		bySecret: make(map[[sha256.Size]byte]*entry),
		byKey:    make(map[string]*entry),
	}
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	}
	go func() { s.serveErr <- s.srv.Serve(ln) }()
	return s, nil
}

// LocalURL is the server's base URL on this host, without /v1.
func (s *Server) LocalURL() string {
	return "http://" + net.JoinHostPort(s.host, strconv.Itoa(s.port))
}

// Close stops the server and drops its open connections. Later calls return
// the first call's result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if err := s.srv.Close(); err != nil {
			s.closeErr = fmt.Errorf("interception close: %w", err)
			return
		}
		if err := <-s.serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.closeErr = fmt.Errorf("interception serve: %w", err)
		}
	})
	return s.closeErr
}

// Register adds a rollout and returns its new secret.
func (s *Server) Register(r Rollout) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("rollout secret: %w", err)
	}
	secret := hex.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byKey[r.Key]; ok {
		return "", fmt.Errorf("register rollout %s: already registered", r.Key)
	}
	e := &entry{rollout: r, secret: []byte(secret)}
	s.byKey[r.Key] = e
	s.bySecret[sha256.Sum256(e.secret)] = e
	return secret, nil
}

// Unregister removes a rollout and returns its turns. Its secret stops working.
func (s *Server) Unregister(key string) ([]trace.Turn, bool) {
	s.mu.Lock()
	e, ok := s.byKey[key]
	if ok {
		delete(s.byKey, key)
		delete(s.bySecret, sha256.Sum256(e.secret))
	}
	s.mu.Unlock()
	if !ok {
		return nil, false
	}
	return e.snapshot(), true
}

// Turns returns the turns recorded so far for a rollout.
func (s *Server) Turns(key string) ([]trace.Turn, bool) {
	s.mu.RLock()
	e, ok := s.byKey[key]
	s.mu.RUnlock()
	if !ok {
		return nil, false
	}
	return e.snapshot(), true
}

// Len is how many rollouts are registered.
func (s *Server) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byKey)
}

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	case r.URL.Path == "/v1/chat/completions" && r.Method == http.MethodPost:
		s.authenticated(w, r, s.chat)
	case r.URL.Path == "/v1/models" && r.Method == http.MethodGet:
		s.authenticated(w, r, s.models)
	case r.URL.Path == "/v1/chat/completions" || r.URL.Path == "/v1/models":
		dialects.WriteChatError(w, http.StatusMethodNotAllowed, dialects.ErrorTypeInvalidRequest, "method_not_allowed",
			fmt.Sprintf("Method %s is not allowed on %s.", r.Method, r.URL.Path))
	default:
		dialects.WriteChatError(w, http.StatusNotFound, dialects.ErrorTypeInvalidRequest, "unknown_url",
			fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path))
	}
}

// authenticated finds the rollout by the secret in Authorization: Bearer or
// x-api-key, answering 401 when there is none.
func (s *Server) authenticated(w http.ResponseWriter, r *http.Request, next func(http.ResponseWriter, *http.Request, *entry)) {
	e := s.lookup(presentedSecret(r.Header))
	if e == nil {
		dialects.WriteChatError(w, http.StatusUnauthorized, dialects.ErrorTypeInvalidRequest, "invalid_api_key",
			"Incorrect API key provided.")
		return
	}
	next(w, r, e)
}

func presentedSecret(h http.Header) string {
	if v := h.Get("Authorization"); len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return h.Get("X-Api-Key")
}

// lookup finds a rollout by secret. The map is keyed by the secret's hash, so
// the lookup leaks nothing useful through timing, and the final comparison
// is constant-time.
func (s *Server) lookup(secret string) *entry {
	if secret == "" {
		return nil
	}
	s.mu.RLock()
	e := s.bySecret[sha256.Sum256([]byte(secret))]
	s.mu.RUnlock()
	if e == nil || subtle.ConstantTimeCompare(e.secret, []byte(secret)) != 1 {
		return nil
	}
	return e
}

// models answers GET /v1/models with the models of the registered rollouts.
func (s *Server) models(w http.ResponseWriter, _ *http.Request, _ *entry) {
	s.mu.RLock()
	seen := make(map[string]bool)
	for _, e := range s.byKey {
		if e.rollout.Model != "" {
			seen[e.rollout.Model] = true
		}
	}
	s.mu.RUnlock()
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, id := range slices.Sorted(maps.Keys(seen)) {
		list.Data = append(list.Data, model{ID: id, Object: "model", OwnedBy: "evalflow"})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}
