// Package targets builds the endpoints the benchmarks compare: the mock
// model itself, a bare httputil.ReverseProxy in front of it, and the
// interception server's relay and translate arms.
package targets

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/evalflow/evalflow/bench/loadgen"
	"github.com/evalflow/evalflow/bench/upstream"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/providers"
)

// Dialect names, as the dialects package spells them.
const (
	Chat      = "chat"
	Responses = "responses"
	Anthropic = "anthropic"
)

// Path is the route of a dialect, below the base URL.
func Path(dialect string) string {
	switch dialect {
	case Responses:
		return upstream.PathResponses
	case Anthropic:
		return upstream.PathMessages
	default:
		return upstream.PathChat
	}
}

// Body is a request of dialect whose user message pads it to about size
// bytes, streaming or not.
func Body(dialect string, size int, stream bool) []byte {
	pad := strings.Repeat("y", max(size-120, 1))
	s := ""
	if stream {
		s = `"stream":true,`
	}
	switch dialect {
	case Responses:
		return []byte(`{"model":"caller",` + s + `"input":"` + pad + `"}`)
	case Anthropic:
		return []byte(`{"model":"caller",` + s + `"max_tokens":64,"messages":[{"role":"user","content":"` + pad + `"}]}`)
	default:
		return []byte(`{"model":"caller",` + s + `"messages":[{"role":"user","content":"` + pad + `"}]}`)
	}
}

// Direct is the mock itself at base (without /v1).
func Direct(name, base, dialect string, body []byte) loadgen.Target {
	return loadgen.Target{Name: name, URL: base + Path(dialect), Body: body, Header: authHeader("sk-bench")}
}

func authHeader(secret string) func() http.Header {
	return func() http.Header {
		return http.Header{
			"Authorization":     {"Bearer " + secret},
			"X-Api-Key":         {secret},
			"Anthropic-Version": {"2023-06-01"},
		}
	}
}

// Transport is the upstream transport given to the reverse proxy baseline:
// tuned so that it never reconnects under the benchmarks' loads.
func Transport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: 2048,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

// Server is a benchmark endpoint in front of the mock.
type Server struct {
	// URL is the base URL, without /v1.
	URL   string
	close func() error
}

// Close stops the server.
func (s *Server) Close() error { return s.close() }

// ReverseProxy starts a bare httputil.ReverseProxy to the mock at base.
func ReverseProxy(base string) (*Server, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("reverse proxy target: %w", err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		Transport: Transport(),
		ErrorLog:  nil,
	}
	base, closeFn, err := upstream.Listen(rp, false)
	if err != nil {
		return nil, err
	}
	return &Server{URL: base, close: closeFn}, nil
}

// Interception is an interception server in front of the mock, its upstream
// speaking upDialect. Its calls are spread over Rollouts rollouts in
// flight at once, as a worker serves them: each call goes to the next one
// in turn, and a rollout ends after Rotate turns or rolloutBytes request
// bytes, when another takes its place. The first rollouts end early by
// steps, so that rollouts end one at a time rather than all at once, and
// the memory their recorded turns hold stays level as it does on a worker
// whose rollouts come and go. An ended rollout is read (its turns parsed)
// and unregistered in the background once the calls sent to it since are
// certainly done.
type Interception struct {
	Srv *interception.Server
	// Rollouts is how many rollouts take calls at once; 64 when 0.
	Rollouts int
	// Rotate is how many turns a rollout takes; 32 when 0.
	Rotate int

	mu      sync.Mutex
	calls   int
	slots   []slot
	ended   []endedRollout // oldest first
	serial  int
	started bool

	// drops unregister ended rollouts in the background: reading their
	// turns parses them (issue 6), a cost the process still pays but no
	// client waits for.
	drops   sync.WaitGroup
	countMu sync.Mutex
	turns   int
	errored int
}

// slot is one of the rollouts in flight.
type slot struct {
	key, secret string
	// left is how many turns it takes still; bytes how many request
	// bytes it may carry still.
	left, bytes int
}

// endedRollout is a rollout that takes no more calls, and the call count
// when it ended.
type endedRollout struct {
	key  string
	call int
}

// rolloutBytes bounds the request bytes of a rollout, so that large turns
// do not pile up: a rollout of 1 MB requests ends after two.
const rolloutBytes = 2 << 20

// dropAfter is how many calls after its end a rollout is read and
// unregistered: every call sent to it is done by then (a closed loop has
// at most a few hundred calls in flight).
const dropAfter = 256

// Upstream is the upstream client of dialect at base (without /v1); with
// h2c it speaks unencrypted HTTP/2 so that many streams share a few
// connections.
func Upstream(dialect, base string, h2c bool) (*providers.Client, error) {
	up, err := providers.New(dialect, base+"/v1", "sk-upstream")
	if err != nil {
		return nil, err
	}
	if h2c {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		t := Transport()
		t.Protocols = &p
		up.Client = &http.Client{Transport: t}
	}
	return up, nil
}

// NewInterception starts an interception server relaying to up.
func NewInterception(up interception.Upstream) (*Interception, error) {
	srv, err := interception.Listen(interception.Config{Upstream: up, Multiplex: 1 << 20})
	if err != nil {
		return nil, err
	}
	return &Interception{Srv: srv}, nil
}

// register registers a rollout for a slot.
func (i *Interception) register() (slot, error) {
	i.serial++
	key := fmt.Sprintf("bench/0/%d/0", i.serial)
	secret, err := i.Srv.Register(interception.Rollout{Key: key, Model: "bench"})
	return slot{key: key, secret: secret, left: max(i.Rotate, 1), bytes: rolloutBytes}, err
}

// start fills the slots; the first rollout of slot k takes only about
// (k+1)/Rollouts of its turns, so that they end one at a time.
func (i *Interception) start() {
	if i.Rotate <= 0 {
		i.Rotate = 32
	}
	if i.Rollouts <= 0 {
		i.Rollouts = 64
	}
	i.slots = make([]slot, i.Rollouts)
	for k := range i.slots {
		s, err := i.register()
		if err != nil {
			panic(err) // Register fails only when the random source does
		}
		s.left = max(1, (k+1)*i.Rotate/i.Rollouts)
		s.bytes = max(1, (k+1)*rolloutBytes/i.Rollouts)
		i.slots[k] = s
	}
	i.started = true
}

// drop unregisters a rollout and counts its turns.
func (i *Interception) drop(key string) {
	turns, _ := i.Srv.Finish(key)
	i.Srv.Unregister(key)
	errored := 0
	for _, t := range turns {
		if t.Error != "" || t.Status != http.StatusOK {
			errored++
		}
	}
	i.countMu.Lock()
	defer i.countMu.Unlock()
	i.turns += len(turns)
	i.errored += errored
}

// Header returns the headers of the next call.
func (i *Interception) Header() http.Header { return i.header(0) }

// header is Header for a call carrying n request bytes: the next slot's
// rollout takes it, and ends if it has taken its last.
func (i *Interception) header(n int) http.Header {
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.started {
		i.start()
	}
	i.calls++
	s := &i.slots[i.calls%len(i.slots)]
	secret := s.secret
	s.left--
	s.bytes -= n
	if s.left <= 0 || s.bytes <= 0 {
		i.ended = append(i.ended, endedRollout{key: s.key, call: i.calls})
		next, err := i.register()
		if err != nil {
			panic(err)
		}
		*s = next
	}
	for len(i.ended) > 0 && i.calls-i.ended[0].call >= dropAfter {
		key := i.ended[0].key
		i.drops.Go(func() { i.drop(key) })
		i.ended = i.ended[1:]
	}
	return authHeader(secret)()
}

// Target is a target on the server's route of dialect. Its Settle reads
// the rollouts that have ended, so that a load window pays for parsing
// about as many turns as it served, while the rollouts in flight keep
// their turns (and the memory they hold) into the next window, as on a
// worker that runs for hours.
func (i *Interception) Target(name, dialect string, body []byte) loadgen.Target {
	return loadgen.Target{Name: name, URL: i.Srv.LocalURL() + Path(dialect), Body: body,
		Header: func() http.Header { return i.header(len(body)) },
		Settle: i.settle}
}

// settle reads and unregisters every ended rollout. Call it when no load
// runs.
func (i *Interception) settle() {
	i.mu.Lock()
	for _, e := range i.ended {
		key := e.key
		i.drops.Go(func() { i.drop(key) })
	}
	i.ended = nil
	i.mu.Unlock()
	i.drops.Wait()
}

// Turns unregisters every rollout and returns how many turns were recorded
// and how many of them record an error or a status other than 200, those
// of the rollouts dropped earlier included. Call it when no load runs.
func (i *Interception) Turns() (turns, errored int) {
	i.settle()
	i.mu.Lock()
	for _, s := range i.slots {
		i.drop(s.key)
	}
	i.slots, i.started = nil, false
	i.mu.Unlock()
	i.countMu.Lock()
	defer i.countMu.Unlock()
	return i.turns, i.errored
}

// Close stops the server.
func (i *Interception) Close() error { return i.Srv.Close() }
