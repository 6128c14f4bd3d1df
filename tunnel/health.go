package tunnel

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// HealthPath is the route an interception server answers health checks on.
const HealthPath = "/healthz"

// probe is the client of end-to-end checks: no keep-alive, so every check
// crosses the tunnel anew.
var probe = &http.Client{
	Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
	Timeout:   10 * time.Second,
}

// Check tells whether an exposure still reaches its server: first what the
// exposure knows about itself (Watched), then a GET of HealthPath through
// its URL. The error wraps ErrDead.
func Check(ctx context.Context, name string, e Exposure) error {
	if w, ok := e.(Watched); ok {
		if err := w.Err(); err != nil {
			return &Error{Tunnel: name, Op: "health", Err: fmt.Errorf("%w: %w", ErrDead, err)}
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL()+HealthPath, nil)
	if err != nil {
		return &Error{Tunnel: name, Op: "health", Err: err}
	}
	resp, err := probe.Do(req)
	if err != nil {
		return &Error{Tunnel: name, Op: "health", Err: fmt.Errorf("%w: %w", ErrDead, err)}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<10))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &Error{Tunnel: name, Op: "health", Err: fmt.Errorf("%w: %s answered %d", ErrDead, HealthPath, resp.StatusCode)}
	}
	return nil
}
