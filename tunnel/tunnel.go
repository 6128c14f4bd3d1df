// Package tunnel makes a port bound on this host reachable by harnesses that
// may run elsewhere.
package tunnel

import "context"

// Tunnel exposes a bound host port.
type Tunnel interface {
	// BindHost is the interface interception servers should listen on.
	BindHost() string
	// Expose makes host:port reachable and returns how to reach it.
	Expose(ctx context.Context, host string, port int) (Exposure, error)
}

// Exposure is one exposed port. Close removes it.
type Exposure interface {
	// URL is the base URL consumers use, without a trailing slash.
	URL() string
	Close() error
}
