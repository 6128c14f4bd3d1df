package wiring

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/evalflow/evalflow/interception"
)

// gatewayEndpoint serves the rollout gateway at the worker's stable
// --gateway-addr.
type gatewayEndpoint struct {
	ln  net.Listener
	srv *http.Server
}

// listenGateway starts serving pool's gateway at addr.
func listenGateway(addr string, pool *interception.Pool) (*gatewayEndpoint, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rollout gateway (--%s): %w", flagGatewayAddr, err)
	}
	e := &gatewayEndpoint{ln: ln, srv: &http.Server{Handler: pool.GatewayHandler(), ReadHeaderTimeout: 30 * time.Second}}
	go func() { _ = e.srv.Serve(ln) }()
	return e, nil
}

// stopGateway stops the gateway endpoint, if there is one; the calls in
// flight get a few seconds to end.
func (w *Worker) stopGateway() {
	if w.gateway == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.gateway.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		w.cfg.Logger.Warn("stop rollout gateway", "error", err)
	}
	w.gateway = nil
}

// GatewayAddr is the address the worker serves the rollout gateway at once
// started, or "" without one.
func (w *Worker) GatewayAddr() string {
	if w.gateway == nil {
		return ""
	}
	return w.gateway.ln.Addr().String()
}
