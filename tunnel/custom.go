package tunnel

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Custom is a bring-your-own endpoint: the one shared interception server
// listens on all interfaces at Port and consumers reach it at URL, either a
// reverse proxy in front of it or http://host:Port directly. It creates
// nothing. The port serves plaintext HTTP authenticated by per-rollout
// secrets: front it with TLS or a firewall on an untrusted network.
type Custom struct {
	// URL is where consumers reach the server, without /v1.
	URL string
	// Port is the fixed port the server listens on.
	Port int
}

var _ Fixed = Custom{}

// Validate reports a configuration that cannot work.
func (c Custom) Validate() error {
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		return errors.New("custom tunnel: url is required")
	case err != nil:
		return fmt.Errorf("custom tunnel: url: %w", err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return fmt.Errorf("custom tunnel: url %q is not an http(s) URL", c.URL)
	case c.Port <= 0 || c.Port > 65535:
		return fmt.Errorf("custom tunnel: port %d is not a TCP port", c.Port)
	}
	return nil
}

// BindHost implements Tunnel: all interfaces, so a proxy or a remote host can
// reach the port.
func (Custom) BindHost() string { return "0.0.0.0" }

// BindPort implements Fixed.
func (c Custom) BindPort() int { return c.Port }

// Expose implements Tunnel: the configured URL, whatever host and port.
func (c Custom) Expose(ctx context.Context, _ string, _ int) (Exposure, error) {
	if err := ctx.Err(); err != nil {
		return nil, &Error{Tunnel: "custom", Op: "expose", Err: err}
	}
	if err := c.Validate(); err != nil {
		return nil, &Error{Tunnel: "custom", Op: "expose", Err: err}
	}
	return localExposure(strings.TrimSuffix(strings.TrimSuffix(c.URL, "/"), "/v1")), nil
}
