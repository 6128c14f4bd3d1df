// Package tunnel makes a port bound on this host reachable by harnesses that
// may run elsewhere: Local (loopback, nothing to create), Custom (a fixed,
// user-provided endpoint), FRP (an embedded frp client to the user's frps) and
// SSH (a reverse port forward through any SSH server).
package tunnel

import "context"

// Tunnel exposes a bound host port.
type Tunnel interface {
	// BindHost is the interface interception servers should listen on.
	BindHost() string
	// Expose makes host:port reachable and returns how to reach it. Errors
	// are *Error values.
	Expose(ctx context.Context, host string, port int) (Exposure, error)
}

// Exposure is one exposed port. Close removes it.
type Exposure interface {
	// URL is the base URL consumers use, without a trailing slash.
	URL() string
	Close() error
}

// Fixed is a Tunnel whose server must listen on one fixed port. Such a tunnel
// serves every rollout through a single shared server.
type Fixed interface {
	Tunnel
	// BindPort is the port the one server listens on.
	BindPort() int
}

// Watched is an Exposure that notices on its own when it dies (its SSH
// connection dropped, its frp proxy went offline).
type Watched interface {
	Exposure
	// Err is nil while the exposure looks alive and says why once it is not.
	Err() error
}
