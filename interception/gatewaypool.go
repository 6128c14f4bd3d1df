package interception

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception/gateway"
	"github.com/evalflow/evalflow/trace"
)

// gatewayPool is a pool as its gateway sees it: the gateway's rollouts
// are found by key among the pool's registrations.
type gatewayPool struct{ *Pool }

var _ gateway.Pool = gatewayPool{}

// Acquire registers a gateway rollout with the model, sampling and limits
// of its register call.
func (p gatewayPool) Acquire(ctx context.Context, key string, req gateway.RegisterRequest) (string, error) {
	ro := Rollout{Key: key, Model: req.Model, Sampling: req.Sampling, PolicyVersion: req.PolicyVersion,
		Limits: Limits{Turns: req.MaxTurns, Tokens: req.MaxTokens, SeqLen: req.MaxSeqLen}, TokenIn: req.TokenIn}
	if req.TraceTokens {
		ro.Tokens = &dialects.TokenRequest{TopLogprobs: req.TopLogprobs}
	}
	reg, err := p.Pool.Acquire(ctx, ro)
	if err != nil {
		return "", err
	}
	return reg.Secret, nil
}

// Expose exposes a gateway rollout's server (Registration.Expose).
func (p gatewayPool) Expose(ctx context.Context, key string) (string, error) {
	reg, ok := p.registered(key)
	if !ok {
		return "", fmt.Errorf("expose %s: %w", key, ErrUnknownRollout)
	}
	return reg.Expose(ctx)
}

// Turns returns a gateway rollout's turns so far (Registration.Turns).
func (p gatewayPool) Turns(key string) ([]trace.Turn, bool) {
	reg, ok := p.registered(key)
	if !ok {
		return nil, false
	}
	return reg.Turns()
}

// Finish ends a gateway rollout's calls (Registration.Finish).
func (p gatewayPool) Finish(key string) ([]trace.Turn, bool) {
	reg, ok := p.registered(key)
	if !ok {
		return nil, false
	}
	return reg.Finish()
}

// Release releases a gateway rollout (Registration.Release).
func (p gatewayPool) Release(key string) {
	if reg, ok := p.registered(key); ok {
		reg.Release()
	}
}

// ReadBody reads a body within the pool's body read timeout.
func (p gatewayPool) ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, int, string, string) {
	return readBounded(w, r, limit, p.cfg.BodyReadTimeout)
}

// ServeModel serves a model call of a gateway rollout on its own server,
// authenticated by the rollout's secret and recorded alike.
func (p gatewayPool) ServeModel(w http.ResponseWriter, r *http.Request, key string) {
	reg, ok := p.registered(key)
	if !ok {
		id := strings.TrimPrefix(key, gateway.KeyPrefix)
		callerDialect(r.Header).WriteError(w, http.StatusNotFound, "unknown_rollout", "rollout "+id+" is not registered")
		return
	}
	reg.m.srv.ServeHTTP(w, r)
}

// modelPaths are the model routes of the route table as paths below /v1,
// which the gateway serves below each rollout's base URL.
func modelPaths() []string {
	var ps []string
	for _, rt := range (&Server{}).routes(nil) {
		if p, ok := strings.CutPrefix(rt.path, "/v1"); ok && rt.serve != nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// GatewayHandler serves the gateway at an address of its own (the worker's
// --gateway-addr): the gateway routes, the registered rollouts' model
// routes below /v1/rollouts/{id}/, and /healthz. Without a gateway token
// it answers 404 to everything but /healthz.
func (p *Pool) GatewayHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", healthz)
	mux.Handle("/", p.gw.Standalone())
	return decoded{mux: mux, unknown: gateway.NotFound}
}

// SweepGateway ends the gateway registrations whose TTL has passed, as
// unregister does, and returns their ids.
func (p *Pool) SweepGateway() []string { return p.gw.Sweep() }

// DefaultGatewaySweep is how often the sweeper looks for expired gateway
// registrations.
const DefaultGatewaySweep = time.Minute

// StartGatewaySweeper sweeps expired gateway registrations every interval
// (DefaultGatewaySweep when 0) until the pool closes.
func (p *Pool) StartGatewaySweeper(every time.Duration) {
	if every <= 0 {
		every = DefaultGatewaySweep
	}
	p.every(every, func() { p.SweepGateway() })
}
