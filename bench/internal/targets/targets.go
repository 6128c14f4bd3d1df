// Package targets builds the endpoints the benchmarks compare: the mock
// model itself, a bare httputil.ReverseProxy in front of it, and the
// interception server's relay and translate arms.
package targets

import (
	"cmp"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/evalflow/evalflow/bench/internal/loadgen"
	"github.com/evalflow/evalflow/bench/internal/upstream"
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
// and unregistered once its last call is answered: in the background when
// the ended rollouts waiting carried ReadyBytes of requests, else when the
// target settles, so that one request at a time (the latency runs) never
// shares the cores with a parse.
type Interception struct {
	Srv *interception.Server
	// Rollouts is how many rollouts take calls at once; 64 when 0.
	Rollouts int
	// Rotate is how many turns a rollout takes; 32 when 0.
	Rotate int
	// ReadyBytes is how many request bytes of ended rollouts wait to be
	// read before they are read in the background; 32 MB when 0.
	ReadyBytes int

	mu       sync.Mutex
	slots    []*benchRollout
	bySecret map[string]*benchRollout
	serial   int
	next     int
	// ready are ended rollouts whose calls are all answered, carrying
	// readyCarried request bytes.
	ready        []*benchRollout
	readyCarried int

	// drops read and unregister ended rollouts in the background: reading
	// their turns parses them (issue 6), a cost the process still pays
	// but no client waits for.
	drops   sync.WaitGroup
	countMu sync.Mutex
	turns   int
	errored int
}

// benchRollout is one of the target's rollouts.
type benchRollout struct {
	key, secret string
	// left is how many turns it takes still; bytes how many request
	// bytes it may carry still.
	left, bytes int
	// inflight counts its calls not answered yet; ended is set once it
	// takes no more.
	inflight int
	ended    bool
	// carried is the request bytes of its calls.
	carried int
}

// rolloutBytes bounds the request bytes of a rollout, so that large turns
// do not pile up: a rollout of 1 MB requests ends after one.
const rolloutBytes = 1 << 20

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
	return &Interception{Srv: srv, bySecret: map[string]*benchRollout{}}, nil
}

// register registers a rollout; i.mu is held.
func (i *Interception) register() *benchRollout {
	i.serial++
	key := fmt.Sprintf("bench/0/%d/0", i.serial)
	secret, err := i.Srv.Register(interception.Rollout{Key: key, Model: "bench"})
	if err != nil {
		panic(err) // Register fails only when the random source does
	}
	r := &benchRollout{key: key, secret: secret, left: i.Rotate, bytes: rolloutBytes}
	i.bySecret[secret] = r
	return r
}

// start fills the slots; the first rollout of slot k takes only about
// (k+1)/Rollouts of its turns, so that they end one at a time. i.mu is
// held.
func (i *Interception) start() {
	if i.Rotate <= 0 {
		i.Rotate = 32
	}
	if i.Rollouts <= 0 {
		i.Rollouts = 64
	}
	i.slots = make([]*benchRollout, i.Rollouts)
	for k := range i.slots {
		r := i.register()
		r.left = max(1, (k+1)*i.Rotate/i.Rollouts)
		r.bytes = max(1, (k+1)*rolloutBytes/i.Rollouts)
		i.slots[k] = r
	}
}

// Header returns the headers of the next call.
func (i *Interception) Header() http.Header { return i.header(0) }

// header is Header for a call carrying n request bytes: the next slot's
// rollout takes it, and ends if it has taken its last.
func (i *Interception) header(n int) http.Header {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.slots == nil {
		i.start()
	}
	k := i.next % len(i.slots)
	i.next++
	r := i.slots[k]
	r.inflight++
	r.left--
	r.bytes -= n
	r.carried += n
	if r.left <= 0 || r.bytes <= 0 {
		r.ended = true
		i.slots[k] = i.register()
	}
	return authHeader(r.secret)()
}

// done notes that the call sent with headers h is answered, and reads an
// ended rollout whose last call it was.
func (i *Interception) done(h http.Header) {
	i.mu.Lock()
	defer i.mu.Unlock()
	r := i.bySecret[h.Get("X-Api-Key")]
	if r == nil {
		return
	}
	r.inflight--
	if r.ended && r.inflight == 0 {
		delete(i.bySecret, r.secret)
		i.ready = append(i.ready, r)
		i.readyCarried += r.carried
		if i.readyCarried >= cmp.Or(i.ReadyBytes, 32<<20) {
			i.readAll()
		}
	}
}

// readAll reads the ready rollouts in the background; i.mu is held.
func (i *Interception) readAll() {
	for _, r := range i.ready {
		i.drops.Go(func() { i.drop(r.key) })
	}
	i.ready, i.readyCarried = nil, 0
}

// settle reads the ready rollouts and waits until every read is done.
func (i *Interception) settle() {
	i.mu.Lock()
	i.readAll()
	i.mu.Unlock()
	i.drops.Wait()
}

// drop reads and unregisters a rollout, and counts its turns.
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

// Target is a target on the server's route of dialect. Its Settle reads
// the rollouts that have ended and waits for every read, so that a load window pays
// for parsing about as many turns as it served, while the rollouts in
// flight keep their turns (and the memory they hold) into the next
// window, as on a worker that runs for hours.
func (i *Interception) Target(name, dialect string, body []byte) loadgen.Target {
	return loadgen.Target{Name: name, URL: i.Srv.LocalURL() + Path(dialect), Body: body,
		Header: func() http.Header { return i.header(len(body)) },
		Done:   i.done,
		Settle: i.settle}
}

// Parsed is how many turns the rollouts read so far held.
func (i *Interception) Parsed() int {
	i.countMu.Lock()
	defer i.countMu.Unlock()
	return i.turns
}

// Turns reads and unregisters every rollout and returns how many turns
// were recorded and how many of them record an error or a status other
// than 200, those of the rollouts read earlier included. Call it when no
// load runs.
func (i *Interception) Turns() (turns, errored int) {
	i.settle()
	i.mu.Lock()
	for _, r := range i.bySecret {
		i.drop(r.key)
	}
	clear(i.bySecret)
	i.slots = nil
	i.mu.Unlock()
	i.countMu.Lock()
	defer i.countMu.Unlock()
	return i.turns, i.errored
}

// Close stops the server.
func (i *Interception) Close() error { return i.Srv.Close() }
