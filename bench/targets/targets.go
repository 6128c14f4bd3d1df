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
// speaking upDialect. Its rollout rotates every Rotate requests or
// rotateBytes request bytes (the last three stay registered for requests in
// flight), as rollouts come and go, so that recorded turns do not pile up.
type Interception struct {
	Srv *interception.Server
	// Rotate is how many requests a rollout serves; 4096 when 0.
	Rotate int

	mu     sync.Mutex
	calls  int
	bytes  int // request bytes since the last rotation
	keys   []string
	secret string
	serial int

	// drops unregister rotated-out rollouts in the background: reading
	// their turns parses them (issue 6), a cost the process still pays
	// but no client waits for.
	drops   sync.WaitGroup
	countMu sync.Mutex
	turns   int
	errored int
}

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
	i := &Interception{Srv: srv}
	if err := i.rotate(); err != nil {
		_ = srv.Close()
		return nil, err
	}
	return i, nil
}

func (i *Interception) rotate() error {
	i.serial++
	i.bytes = 0
	key := fmt.Sprintf("bench/0/%d/0", i.serial)
	secret, err := i.Srv.Register(interception.Rollout{Key: key, Model: "bench"})
	if err != nil {
		return err
	}
	i.keys = append(i.keys, key)
	i.secret = secret
	if len(i.keys) > 3 {
		key := i.keys[0]
		i.drops.Go(func() { i.drop(key) })
		i.keys = i.keys[1:]
	}
	return nil
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

// Header returns the headers of the next call, rotating the rollout when due.
func (i *Interception) Header() http.Header { return i.header(0) }

// rotateBytes also rotates a rollout once its calls carried this many
// request bytes, so that large turns do not pile up either.
const rotateBytes = 32 << 20

// header is Header for a call carrying n request bytes.
func (i *Interception) header(n int) http.Header {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.calls++
	i.bytes += n
	rot := i.Rotate
	if rot <= 0 {
		rot = 4096
	}
	if i.calls%rot == 0 || i.bytes >= rotateBytes {
		if err := i.rotate(); err != nil {
			panic(err) // Register fails only when the random source does
		}
	}
	return authHeader(i.secret)()
}

// Target is a target on the server's route of dialect.
func (i *Interception) Target(name, dialect string, body []byte) loadgen.Target {
	return loadgen.Target{Name: name, URL: i.Srv.LocalURL() + Path(dialect), Body: body,
		Header: func() http.Header { return i.header(len(body)) },
		Settle: func() { i.Turns() }}
}

// Turns unregisters every rollout and returns how many turns were recorded
// and how many of them record an error or a status other than 200, once
// the rollouts rotated out earlier are dropped too. Call it when no load
// runs.
func (i *Interception) Turns() (turns, errored int) {
	i.mu.Lock()
	for _, k := range i.keys {
		i.drop(k)
	}
	i.keys = nil
	_ = i.rotate()
	i.mu.Unlock()
	i.drops.Wait()
	i.countMu.Lock()
	defer i.countMu.Unlock()
	return i.turns, i.errored
}

// Close stops the server.
func (i *Interception) Close() error { return i.Srv.Close() }
