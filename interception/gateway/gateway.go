// Package gateway lets an external trainer run its own agent against a
// rollout of the interception pool: it registers a rollout and gets a base
// URL and a secret for the agent, then fetches the recorded trajectory,
// then unregisters it.
//
//	POST /v1/rollouts/{id}/register   {"model": "...", "sampling_params": {...}, "max_turns": 8, ...}
//	GET  /v1/rollouts/{id}/trajectory[?view=steps&policy_version=N]
//	POST /v1/rollouts/{id}/unregister
//
// Every call presents Config.Token as a bearer token. The routes are
// served by every interception server of the pool (Handler) and, at a
// stable address, by Standalone. Both also serve the rollouts' model
// routes (Config.ModelPaths) below /v1/rollouts/{id}: an agent whose
// OpenAI base URL is {gateway}/v1/rollouts/{id}, as verifiers'
// RolloutGatewayMixin sets it, calls {gateway}/v1/rollouts/{id}/chat/completions;
// {gateway}/v1/rollouts/{id}/v1/... is served too (an Anthropic SDK's
// base URL is {gateway}/v1/rollouts/{id}). An agent's API key there is
// the rollout's secret or the gateway token.
//
// A registration expires after its TTL (Config.TTL, or the register
// call's ttl), when Sweep finds it, so a trainer that never unregisters
// leaks nothing; each one takes a unit of the worker's capacity
// (Config.Slots) while it lives.
package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/evalflow/evalflow/trace"
)

// Prefix starts every path the gateway answers.
const Prefix = "/v1/rollouts/"

// KeyPrefix starts the pool keys of gateway rollouts, so they never
// collide with workflow rollouts (run/epoch/index/k).
const KeyPrefix = "gateway/"

// DefaultTTL is how long a registration lives unless the register call or
// Config.TTL says otherwise.
const DefaultTTL = 4 * time.Hour

// actions are the gateway's routes below Prefix+"{id}/".
var actions = []struct{ name, method string }{
	{"register", http.MethodPost}, {"trajectory", http.MethodGet}, {"unregister", http.MethodPost},
}

var rolloutID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// Pool is what the gateway needs of the interception pool. Keys are the
// pool's, KeyPrefix and the rollout id.
type Pool interface {
	// Acquire takes a slot for the rollout of key as req registers it, and
	// returns the rollout's secret.
	Acquire(ctx context.Context, key string, req RegisterRequest) (secret string, err error)
	// Expose returns the base URL (without /v1) of the rollout's server.
	Expose(ctx context.Context, key string) (string, error)
	// Turns returns the turns recorded so far for a rollout.
	Turns(key string) ([]trace.Turn, bool)
	// Finish ends a rollout's calls and returns its turns.
	Finish(key string) ([]trace.Turn, bool)
	// Release frees a rollout's slot.
	Release(key string)
	// ReadBody reads r's body, at most limit bytes, or says how to answer
	// instead: a status other than 0, with an error code and message.
	ReadBody(w http.ResponseWriter, r *http.Request, limit int64) (body []byte, status int, code, msg string)
	// ServeModel serves r, a model call at its path below the rollout's
	// base URL, on the rollout's own server, answering 404 for a rollout
	// that holds no slot.
	ServeModel(w http.ResponseWriter, r *http.Request, key string)
}

// SlotCounter is the worker's capacity as the gateway uses it: a
// registration takes a unit, or is refused when none is free, and gives it
// back when it ends.
type SlotCounter interface {
	// TryTake takes a unit at once and returns the function that gives it
	// back, or false when none is free.
	TryTake() (give func(), ok bool)
}

// Config configures a Gateway. Zero fields take defaults.
type Config struct {
	// Token is the bearer token every call presents; empty, the gateway
	// has no routes. A credential: never log it.
	Token string
	// TTL is how long a registration lives unless its register call says
	// otherwise; DefaultTTL when 0.
	TTL time.Duration
	// Slots, when set, counts registrations against the worker's capacity.
	Slots SlotCounter
	// ModelPaths are the rollouts' model routes, as http.ServeMux paths
	// below /v1 ("/chat/completions", "/models/{model...}"): each is
	// served at Prefix+"{id}"+path too.
	ModelPaths []string
	// Now is the clock of expiries; time.Now when nil.
	Now    func() time.Time
	Logger *slog.Logger
}

// Gateway serves the gateway's routes over a pool and keeps its
// registrations' expiries.
type Gateway struct {
	cfg                  Config
	token                [sha256.Size]byte // the hash of cfg.Token
	pool                 Pool
	onServer, standalone *http.ServeMux

	mu   sync.Mutex
	regs map[string]registration // by rollout id
}

// registration is what the gateway keeps of a registered rollout.
type registration struct {
	// registering is set while its register call takes the slot: the id
	// is taken, the rollout not registered yet.
	registering bool
	expires     time.Time
	// give gives its unit of the worker's capacity back (Config.Slots).
	give func()
	// secret is the rollout's, which a model call presenting the gateway
	// token is served with.
	secret string
	// maxOffPolicy is the register call's max_off_policy_steps.
	maxOffPolicy *int
}

// New returns the gateway of pool p.
func New(p Pool, cfg Config) *Gateway {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{cfg: cfg, token: sha256.Sum256([]byte(cfg.Token)), pool: p, regs: make(map[string]registration)}
	g.onServer, g.standalone = g.routes(false), g.routes(true)
	return g
}

// Routes are the gateway's routes as http.ServeMux patterns,
// "METHOD /v1/rollouts/{id}/action".
func Routes() []string {
	var ps []string
	for _, a := range actions {
		ps = append(ps, a.method+" "+Prefix+"{id}/"+a.name)
	}
	return ps
}

// Handler serves the gateway's routes as an interception server does,
// below Prefix: anything else there is an unknown gateway route.
func (g *Gateway) Handler() http.Handler { return g.onServer }

// Standalone serves the gateway at an address of its own (the worker's
// --gateway-addr): its routes, with base URLs at that address, and the
// registered rollouts' model routes below Prefix+"{id}/". Anything else is
// an unknown gateway route.
func (g *Gateway) Standalone() http.Handler { return g.standalone }

// routes is the gateway's mux: its actions and the rollouts' model routes;
// standalone sets the base URLs register answers.
func (g *Gateway) routes(standalone bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/", notFound)
	if g.cfg.Token == "" {
		return mux
	}
	for _, a := range actions {
		path := Prefix + "{id}/" + a.name
		h := g.guard(a.name, a.method, g.action(a.name, standalone))
		mux.HandleFunc(a.method+" "+path, h)
		mux.HandleFunc(path, h) // the other methods: 405 once id and token pass
	}
	mux.HandleFunc(Prefix+"{id}/v1/{path...}", func(w http.ResponseWriter, r *http.Request) {
		g.serveModel(w, r, "/"+r.PathValue("path"))
	})
	mux.HandleFunc(Prefix+"{id}/v1", notFound) // not redirected to .../v1/
	for _, p := range g.cfg.ModelPaths {       // a pattern: /models/{model...} takes a model's name
		mux.HandleFunc(Prefix+"{id}"+p, func(w http.ResponseWriter, r *http.Request) {
			g.serveModel(w, r, strings.TrimPrefix(r.URL.Path, Prefix+r.PathValue("id")))
		})
	}
	return mux
}

// guard checks a call's rollout id, token and method, in that order, and
// serves it. OPTIONS is answered with a 204 and the Allow header, which a
// 405 carries too.
func (g *Gateway) guard(action, method string, serve func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	allow := method + ", " + http.MethodOptions
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		switch {
		case !rolloutID.MatchString(id):
			notFound(w, r)
		case !g.authorized(r):
			writeError(w, http.StatusUnauthorized, "missing or wrong gateway token")
		case r.Method == http.MethodOptions:
			w.Header().Set("Allow", allow)
			w.WriteHeader(http.StatusNoContent)
		case r.Method != method: // HEAD, which a GET pattern takes too
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" is not allowed on "+action)
		default:
			serve(w, r, id)
		}
	}
}

func (g *Gateway) action(name string, standalone bool) func(http.ResponseWriter, *http.Request, string) {
	switch name {
	case "register":
		return func(w http.ResponseWriter, r *http.Request, id string) { g.register(w, r, id, standalone) }
	case "trajectory":
		return g.trajectory
	default:
		return g.unregister
	}
}

// serveModel serves a model call of a gateway rollout, made at path (below
// /v1) of the rollout's base URL on the gateway, on the rollout's own
// server: authenticated by the rollout's secret and recorded alike. A
// caller presenting the gateway token as its API key (the one credential
// an environment written to verifiers' gateway contract has) is served
// as if it presented the secret.
func (g *Gateway) serveModel(w http.ResponseWriter, r *http.Request, path string) {
	id := r.PathValue("id")
	if !rolloutID.MatchString(id) {
		notFound(w, r)
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path, r2.URL.RawPath = "/v1"+path, ""
	g.asRollout(r2.Header, id)
	g.pool.ServeModel(w, r2, KeyPrefix+id)
}

// asRollout replaces the gateway token, where h carries it as an API key
// (a bearer token or x-api-key), with the secret of rollout id.
func (g *Gateway) asRollout(h http.Header, id string) {
	g.mu.Lock()
	secret := g.regs[id].secret
	g.mu.Unlock()
	if secret == "" {
		return
	}
	if scheme, token, ok := strings.Cut(h.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "bearer") && g.isToken(token) {
		h.Set("Authorization", "Bearer "+secret)
	}
	if g.isToken(h.Get("X-Api-Key")) {
		h.Set("X-Api-Key", secret)
	}
}

// authorized reports whether r presents the token as its bearer token,
// compared by hash in constant time.
func (g *Gateway) authorized(r *http.Request) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "bearer") && g.isToken(token)
}

// isToken reports whether s is the gateway token, compared by hash in
// constant time.
func (g *Gateway) isToken(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" {
		return false
	}
	got := sha256.Sum256([]byte(s))
	return subtle.ConstantTimeCompare(got[:], g.token[:]) == 1
}

func (g *Gateway) trajectory(w http.ResponseWriter, r *http.Request, id string) {
	q, ok := readQuery(w, r)
	if !ok {
		return
	}
	turns, ok := g.pool.Turns(KeyPrefix + id)
	if !ok {
		writeError(w, http.StatusNotFound, "rollout "+id+" is not registered")
		return
	}
	g.mu.Lock()
	q.maxOffPolicy = g.regs[id].maxOffPolicy
	g.mu.Unlock()
	writeJSON(w, http.StatusOK, trajectoryOf(id, turns, q))
}

func (g *Gateway) unregister(w http.ResponseWriter, r *http.Request, id string) {
	q, ok := readQuery(w, r)
	if !ok {
		return
	}
	g.mu.Lock()
	q.maxOffPolicy = g.regs[id].maxOffPolicy
	g.mu.Unlock()
	turns, ok := g.end(id)
	if !ok {
		writeError(w, http.StatusNotFound, "rollout "+id+" is not registered")
		return
	}
	writeJSON(w, http.StatusOK, trajectoryOf(id, turns, q))
}

// Sweep ends the registrations whose TTL has passed, as unregister does,
// and returns their ids.
func (g *Gateway) Sweep() []string {
	now := g.cfg.Now()
	g.mu.Lock()
	var expired []string
	for id, reg := range g.regs {
		if !reg.registering && !now.Before(reg.expires) {
			expired = append(expired, id)
		}
	}
	g.mu.Unlock()
	sort.Strings(expired)
	for _, id := range expired {
		g.end(id)
		g.cfg.Logger.Info("gateway registration expired", "rollout", id)
	}
	return expired
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"message": msg, "type": "gateway_error"}})
}

func notFound(w http.ResponseWriter, _ *http.Request) {
	writeError(w, http.StatusNotFound, "unknown gateway route")
}

// NotFound answers as the gateway does a path below Prefix it has no
// route for.
func NotFound(w http.ResponseWriter, r *http.Request) { notFound(w, r) }
