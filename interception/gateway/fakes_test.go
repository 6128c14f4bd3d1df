package gateway_test

import (
	"context"
	"io"
	"net/http"
	"sync"

	"github.com/evalflow/evalflow/interception/gateway"
	"github.com/evalflow/evalflow/trace"
)

// fakePool holds rollouts by key, as the interception pool does.
type fakePool struct {
	mu        sync.Mutex
	held      map[string]gateway.RegisterRequest
	exposeErr error
	// turns are every rollout's; one answered turn when nil.
	turns []trace.Turn
}

func (p *fakePool) Acquire(_ context.Context, key string, req gateway.RegisterRequest) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held[key] = req
	return "secret-of-" + key, nil
}

func (p *fakePool) Expose(context.Context, string) (string, error) {
	return "http://tunnel.example", p.exposeErr
}

func (p *fakePool) Held(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.held[key]
	return ok
}

func (p *fakePool) Turns(key string) ([]trace.Turn, bool) {
	if p.turns != nil {
		return append([]trace.Turn{}, p.turns...), p.Held(key)
	}
	return []trace.Turn{{Status: http.StatusOK}}, p.Held(key)
}

func (p *fakePool) Finish(key string) ([]trace.Turn, bool) { return p.Turns(key) }

func (p *fakePool) Release(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.held, key)
}

func (p *fakePool) ReadBody(_ http.ResponseWriter, r *http.Request, limit int64) ([]byte, int, string, string) {
	b, err := io.ReadAll(io.LimitReader(r.Body, limit))
	if err != nil {
		return nil, http.StatusBadRequest, "", err.Error()
	}
	return b, 0, "", ""
}

func (p *fakePool) ServeModel(w http.ResponseWriter, r *http.Request, key string) {
	_, _ = io.WriteString(w, key+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+r.Header.Get("X-Api-Key"))
}

// slots is a capacity of n units.
type slots struct {
	mu    sync.Mutex
	taken int
	n     int
}

func (s *slots) TryTake() (func(), bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken >= s.n {
		return nil, false
	}
	s.taken++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.taken--
		})
	}, true
}

// held is how many units are taken.
func (s *slots) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.taken
}
