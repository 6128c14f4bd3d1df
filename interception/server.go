// Package interception runs the HTTP servers harnesses send their model calls
// to: it authenticates each call by its rollout's secret, relays it to the
// upstream provider with the run's model and sampling when both speak the
// same dialect, translates it otherwise, and records every turn.
//
// Each server's http.ServeMux also serves the side routes of the programs
// beside a harness (package sidecar) and, with a gateway token, the
// rollout gateway's (package gateway): handlers of their own over small
// interfaces the server and the pool satisfy (side.go, gatewaypool.go).
package interception

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception/gateway"
	"github.com/evalflow/evalflow/interception/sidecar"
	"github.com/evalflow/evalflow/internal/metrics"
	"github.com/evalflow/evalflow/internal/prices"
	"github.com/evalflow/evalflow/trace"
	"github.com/evalflow/evalflow/tunnel"
)

// Defaults for Config.
const (
	DefaultMultiplex       = 32
	DefaultMaxBodyBytes    = 32 << 20
	DefaultBodyReadTimeout = 60 * time.Second
)

// Config configures a Pool and the servers in it. Zero fields take defaults.
type Config struct {
	// Multiplex is how many rollouts share one server.
	Multiplex int
	// Tunnel makes servers reachable; tunnel.Local{} when nil.
	Tunnel   tunnel.Tunnel
	Upstream Upstream
	// MaxBodyBytes bounds request bodies; larger ones get a 413.
	MaxBodyBytes int64
	// BodyReadTimeout bounds the time to read a request's whole body, once
	// its headers are in; a slower body gets a 408. The headers have 30 s.
	BodyReadTimeout time.Duration
	Logger          *slog.Logger
	// OnTurn, when set, is called with every turn after it is recorded, from
	// the request's goroutine. Setting it puts the relay arm's parse of the
	// turn (turns.go) back on the request's path: it is for tests.
	OnTurn func(rolloutKey string, turn trace.Turn)
	// GatewayToken enables the rollout gateway's routes (package gateway)
	// for callers presenting it; empty disables them. A credential: never
	// log it.
	GatewayToken string
	// GatewayTTL is how long a gateway registration lives unless its
	// register call says otherwise; gateway.DefaultTTL when 0.
	GatewayTTL time.Duration
	// GatewaySlots, when set, counts gateway registrations against the
	// worker's capacity.
	GatewaySlots gateway.SlotCounter
	// Now is the clock of gateway expiries; time.Now when nil.
	Now func() time.Time
	// Metrics counts every model call served; nil counts nothing.
	Metrics *metrics.Metrics
	// Prices price every turn from the usage its provider reported
	// (trace.Turn.CostUSD); prices.Default() when nil.
	Prices prices.Table
	// ClaudeModels reads a model name as the Claude model it stands for
	// (a proxy's alias: "sonnet" as "claude-sonnet-4-6"), for what a call
	// translated to an Anthropic upstream asks of it
	// (dialects.ClaudeTraitsOf): adaptive thinking or a thinking budget,
	// structured outputs. A name not in it is read as it is.
	ClaudeModels map[string]string

	// gateway is the pool's gateway routes, which each of its servers
	// serves; nil without a GatewayToken.
	gateway http.Handler
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
	if c.BodyReadTimeout <= 0 {
		c.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Prices == nil {
		c.Prices = prices.Default()
	}
	return c
}

// Rollout is what a server needs to know about a rollout it serves.
type Rollout struct {
	Key      string
	Model    string
	Sampling dialects.Sampling
	// Limits bound the rollout's model calls (limits.go).
	Limits Limits
	// Tokens, when set, asks chat upstreams for token-level data and
	// records it on every turn (tokens.go).
	Tokens *dialects.TokenRequest
	// TokenIn sends a chat call that extends an earlier turn with the
	// prompt as token ids (tokenin.go); it implies Tokens.
	TokenIn bool
	// PolicyVersion is the policy version the rollout was started on; every
	// turn records it unless the upstream names its own in the header
	// PolicyVersionHeader (policy.go).
	PolicyVersion       *int64
	PolicyVersionHeader string
	// Policy, when set, is the providers the rollout's model calls go to,
	// each after the one before failed (route.go); they speak the server's
	// upstream's dialect. Empty: Config.Upstream, named in no turn.
	Policy []Target
	// User is the providers of the rollout's simulated user, alike; empty:
	// Config.Upstream.
	User []Target

	// prices are the server's (Config.Prices), which Register sets.
	prices prices.Table
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

	routed decoded          // the routes (newMux)
	up     dialects.Dialect // the upstream's

	mu       sync.RWMutex
	bySecret map[[sha256.Size]byte]*entry
	byKey    map[string]*entry
}

// Listen starts a server on cfg.Tunnel's bind host at a free port.
func Listen(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if cfg.Upstream == nil {
		return nil, errors.New("interception: no upstream configured")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Tunnel.BindHost(), strconv.Itoa(bindPort(cfg.Tunnel))))
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
		up:       upstreamDialect(cfg.Upstream),
		bySecret: make(map[[sha256.Size]byte]*entry),
		byKey:    make(map[string]*entry),
	}
	s.routed = decoded{mux: s.newMux(), unknown: s.unknown}
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
	if r.TokenIn && r.Tokens == nil {
		r.Tokens = &dialects.TokenRequest{}
	}
	if err := s.checkRoutes(r); err != nil {
		return "", fmt.Errorf("register rollout %s: %w", r.Key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byKey[r.Key]; ok {
		return "", fmt.Errorf("register rollout %s: already registered", r.Key)
	}
	r.prices = s.cfg.Prices
	e := &entry{rollout: r, secret: []byte(secret)}
	s.byKey[r.Key] = e
	s.bySecret[sha256.Sum256(e.secret)] = e
	return secret, nil
}

// Finish ends a rollout's calls and returns its turns: its secret stops
// working, and the calls whose caller already has its answer are waited
// for (see settleTimeout) so that their turns are in; a call still
// waiting on the upstream is returned as a turn never answered
// (status 499, no upstream failure named: the provider may yet answer,
// and it is the caller that is gone). The rollout stays
// registered, its turns readable, until Unregister.
func (s *Server) Finish(key string) ([]trace.Turn, bool) {
	s.mu.Lock()
	e, ok := s.byKey[key]
	if ok {
		delete(s.bySecret, sha256.Sum256(e.secret))
	}
	s.mu.Unlock()
	if !ok {
		return nil, false
	}
	e.settle(settleTimeout)
	turns := e.snapshot()
	for _, t := range e.unanswered() {
		if _, found := slices.BinarySearchFunc(turns, t.Index, func(r trace.Turn, i int) int { return r.Index - i }); !found {
			turns = append(turns, t)
		}
	}
	slices.SortStableFunc(turns, func(a, b trace.Turn) int { return a.Index - b.Index })
	return turns, true
}

// Unregister removes a rollout and reports whether it was registered. Its
// secret stops working and its turns are let go: read them with Finish
// first.
func (s *Server) Unregister(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byKey[key]
	if !ok {
		return false
	}
	delete(s.byKey, key)
	delete(s.bySecret, sha256.Sum256(e.secret))
	return true
}

// Turns returns the turns recorded so far for a rollout, including those of
// calls already answered (see Finish).
func (s *Server) Turns(key string) ([]trace.Turn, bool) {
	s.mu.RLock()
	e, ok := s.byKey[key]
	s.mu.RUnlock()
	if !ok {
		return nil, false
	}
	e.settle(settleTimeout)
	return e.snapshot(), true
}

// Len is how many rollouts are registered.
func (s *Server) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byKey)
}

// route is one entry of the route table.
type route struct {
	method, path string
	// dialect shapes the route's errors; nil picks one from the caller's headers.
	dialect dialects.Dialect
	// serve answers an authenticated call; public routes set open instead,
	// and the side routes side, a handler of their own that authenticates.
	serve func(http.ResponseWriter, *http.Request, *entry, dialects.Dialect)
	open  http.HandlerFunc
	side  http.Handler
}

// Route is one route of an interception server, as Routes lists it.
type Route struct {
	Method, Path string
	// Dialect shapes the route's errors; nil when the caller's headers pick
	// it (Anthropic-Version: Anthropic's, else OpenAI's) or, on a gateway
	// route, the gateway's own OpenAI-like shape.
	Dialect dialects.Dialect
	// Public routes need no secret. Gateway routes exist only with
	// Config.GatewayToken. A Path holds {id} for a rollout's id, or a
	// model's on /v1/models/{id}.
	Public, Gateway bool
	// Body says the route reads a request body.
	Body bool
}

// Routes lists every route a server answers, from its own route table and
// the gateway's: what a test must cover to cover the server.
func Routes() []Route {
	var rs []Route
	for _, rt := range (&Server{}).routes(nil) {
		rs = append(rs, Route{Method: rt.method, Path: strings.Replace(rt.path, "{model...}", "{id}", 1), Dialect: rt.dialect,
			Public: rt.open != nil, Body: rt.method != http.MethodGet})
	}
	for _, p := range gateway.Routes() {
		method, urlPath, _ := strings.Cut(p, " ")
		rs = append(rs, Route{Method: method, Path: urlPath, Gateway: true, Body: strings.HasSuffix(urlPath, "/register")})
	}
	return rs
}

// routes is the route table: every path the server answers but the
// gateway's, the side routes served by side. Add new routes here.
func (s *Server) routes(side http.Handler) []route {
	rs := []route{
		{method: http.MethodGet, path: "/healthz", open: healthz},
		{method: http.MethodGet, path: "/v1/models", serve: s.models},
		// A model's name may hold slashes (Qwen/Qwen3-8B).
		{method: http.MethodGet, path: "/v1/models/{model...}", serve: s.modelInfo},
		{method: http.MethodPost, path: "/v1/messages/count_tokens", dialect: dialects.Anthropic, serve: s.countTokens},
	}
	for _, d := range dialects.All {
		rs = append(rs, route{method: http.MethodPost, path: "/v1" + d.Path(), dialect: d, serve: s.model})
	}
	for _, p := range sidecar.Routes() {
		method, urlPath, _ := strings.Cut(p, " ")
		rs = append(rs, route{method: method, path: urlPath, side: side})
	}
	return rs
}

// newMux composes the server's routes: the route table, each path of it
// answering OPTIONS and its other methods itself (otherMethods), and the
// gateway's routes when the pool has a gateway. Anything else is an
// unknown URL.
func (s *Server) newMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/", notFound)
	paths := make(map[string]*pathRoutes)
	for _, rt := range s.routes(sidecar.New(sideProxy{s}, s.cfg.MaxBodyBytes)) {
		mux.Handle(rt.method+" "+rt.path, s.handler(rt))
		p := paths[rt.path]
		if p == nil {
			p = &pathRoutes{}
			paths[rt.path] = p
		}
		p.dialect = rt.dialect
		p.methods = append(p.methods, rt.method)
	}
	for urlPath, p := range paths {
		mux.Handle(urlPath, otherMethods(p.dialect, p.allow()))
	}
	if s.cfg.gateway != nil {
		mux.Handle(gateway.Prefix, s.cfg.gateway)
		// An unknown URL, not a redirect to the gateway's prefix.
		mux.HandleFunc(strings.TrimSuffix(gateway.Prefix, "/"), notFound)
	}
	return mux
}

// handler serves a route of the table.
func (s *Server) handler(rt route) http.Handler {
	switch {
	case rt.open != nil:
		return rt.open
	case rt.side != nil:
		return rt.side
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := rt.dialect
		if d == nil {
			d = callerDialect(r.Header)
		}
		if e := s.authenticate(w, r, d); e != nil {
			rt.serve(w, r, e, d)
		}
	})
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// callerDialect guesses the dialect of a caller on a route that has none of
// its own: Anthropic SDKs send anthropic-version.
func callerDialect(h http.Header) dialects.Dialect {
	if h.Get("Anthropic-Version") != "" {
		return dialects.Anthropic
	}
	return dialects.Chat
}

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.routed.ServeHTTP(w, r) }

// unknown answers a path that is no route's: in the gateway's shape below
// its prefix, when the pool has a gateway.
func (s *Server) unknown(w http.ResponseWriter, r *http.Request) {
	if s.cfg.gateway != nil && strings.HasPrefix(r.URL.Path, gateway.Prefix) {
		gateway.NotFound(w, r)
		return
	}
	notFound(w, r)
}

// decoded routes a request through mux by its decoded path, as the
// servers have always matched routes (a %2F is a slash). A path that is
// not clean is no route's: unknown answers it, where http.ServeMux would
// redirect to the clean path.
type decoded struct {
	mux     http.Handler
	unknown http.HandlerFunc
}

func (d decoded) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	clean := path.Clean(p)
	if clean != "/" && strings.HasSuffix(p, "/") {
		clean += "/"
	}
	if clean != p || !strings.HasPrefix(p, "/") { // "*" too, which http.ServeMux refuses with a 400
		d.unknown(w, r)
		return
	}
	if r.URL.RawPath != "" {
		r2, u := *r, *r.URL
		u.RawPath = ""
		r2.URL = &u
		r = &r2
	}
	d.mux.ServeHTTP(w, r)
}

func notFound(w http.ResponseWriter, r *http.Request) {
	callerDialect(r.Header).WriteError(w, http.StatusNotFound, "unknown_url", fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path))
}

// pathRoutes are the routes of one path: their methods, and the dialect
// of the path's errors.
type pathRoutes struct {
	methods []string
	dialect dialects.Dialect
}

// allow is the path's Allow header: its methods, HEAD where GET serves
// it, and OPTIONS.
func (p *pathRoutes) allow() string {
	var ms []string
	for _, m := range p.methods {
		ms = append(ms, m)
		if m == http.MethodGet {
			ms = append(ms, http.MethodHead)
		}
	}
	return strings.Join(append(ms, http.MethodOptions), ", ")
}

// otherMethods answers the methods a route's path has no route for:
// OPTIONS with a 204 and the Allow header, any other with a 405 that
// carries it too, in the route's dialect (nil: the caller's). Neither
// needs a secret: they say only which methods the path takes.
func otherMethods(d dialects.Dialect, allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		d := d
		if d == nil {
			d = callerDialect(r.Header)
		}
		d.WriteError(w, http.StatusMethodNotAllowed, "method_not_allowed",
			fmt.Sprintf("Method %s is not allowed on %s.", r.Method, r.URL.Path))
	}
}

// authenticate finds the rollout by the secret in d's carrier (Bearer or
// x-api-key), answering 401 in d's shape and returning nil when there is
// none.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, d dialects.Dialect) *entry {
	e := s.lookup(d.Secret(r.Header))
	if e == nil {
		d.WriteError(w, http.StatusUnauthorized, "invalid_api_key", "Incorrect API key provided.")
	}
	return e
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

// model serves a model call of dialect d as the rollout's next turn:
// relayed (relay.go) when the upstream speaks d, translated (translate.go)
// otherwise.
func (s *Server) model(w http.ResponseWriter, r *http.Request, e *entry, d dialects.Dialect) {
	c := s.startTurn(w, r, e, d)
	defer c.finish()
	body, ok := c.readBody()
	if !ok {
		return
	}
	if which, msg := c.e.admit(c.turn.CallerRetry); which != "" {
		c.refuse(which, msg)
		return
	}
	c.counted = !c.turn.CallerRetry
	if s.up.Name() == d.Name() {
		s.relay(&c, body)
		return
	}
	s.translate(&c, body)
}

// models answers GET /v1/models with the models of the registered rollouts,
// in the caller's family's shape.
func (s *Server) models(w http.ResponseWriter, _ *http.Request, _ *entry, d dialects.Dialect) {
	d.WriteModels(w, slices.Sorted(maps.Keys(s.modelSet())))
}

// modelInfo answers GET /v1/models/{id} with one of the models /v1/models
// lists, in the caller's family's shape; another is a 404 in its error
// shape, as the providers answer a model they do not serve.
func (s *Server) modelInfo(w http.ResponseWriter, r *http.Request, _ *entry, d dialects.Dialect) {
	id := r.PathValue("model")
	if !s.modelSet()[id] {
		d.WriteError(w, http.StatusNotFound, "model_not_found", fmt.Sprintf("The model '%s' does not exist.", id))
		return
	}
	d.WriteModel(w, id)
}

// modelSet is the models of the registered rollouts.
func (s *Server) modelSet() map[string]bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	seen := make(map[string]bool)
	for _, e := range s.byKey {
		if e.rollout.Model != "" {
			seen[e.rollout.Model] = true
		}
	}
	return seen
}
