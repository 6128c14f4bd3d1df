package tunnel

import (
	"context"
	"net"
	"strconv"
)

// Local is the tunnel for harnesses on this host: it binds loopback and
// exposes the port as it is.
type Local struct{}

var _ Tunnel = Local{}

// BindHost implements Tunnel.
func (Local) BindHost() string { return "127.0.0.1" }

// Expose implements Tunnel. It creates nothing, so closing is a no-op.
func (Local) Expose(ctx context.Context, host string, port int) (Exposure, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return localExposure("http://" + net.JoinHostPort(host, strconv.Itoa(port))), nil
}

type localExposure string

func (e localExposure) URL() string { return string(e) }
func (localExposure) Close() error  { return nil }
