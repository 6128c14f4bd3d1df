package wiring

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/tunnel"
)

// Interception types: how harnesses reach the worker's interception servers.
const (
	InterceptionLocal  = "local"
	InterceptionCustom = "custom"
	InterceptionFRP    = "frp"
	InterceptionSSH    = "ssh"
)

// Interception configures how harnesses reach the interception servers. Its
// credentials (the frp token, the SSH key) come only from the worker's own
// flags, environment or files, never from a run's input.
type Interception struct {
	// Type is local (default), custom, frp or ssh.
	Type string `json:"type"`
	// HealthInterval is how often every tunnel is checked end to end; 0 is
	// 30 s.
	HealthInterval time.Duration `json:"health_interval"`
	// CreationsPerMinute bounds tunnel creations on this host, shared by
	// its workers through CreationLimitFile; 0 is 512.
	CreationsPerMinute int `json:"creations_per_minute"`
	// CreationLimitFile is the host-wide token bucket of tunnel creations
	// (tunnel.HostLimiter); empty is tunnel.DefaultLimitFile().
	CreationLimitFile string `json:"creation_limit_file"`
	// Multiplex is how many rollouts share one server and its tunnel; 0 is
	// DefaultMultiplex. A custom endpoint is one shared server: setting it
	// there is an error.
	Multiplex int `json:"multiplex"`
	// Attempts is how often one Expose tries to create a tunnel before the
	// activity fails and Temporal retries it; 0 is 3.
	Attempts int `json:"attempts"`

	// URL and Port configure custom: the one shared server listens on all
	// interfaces at Port and is reached at URL.
	URL  string `json:"url"`
	Port int    `json:"port"`

	// FRPServer is frps's host:port; FRPToken authenticates to it (or
	// FRPTokenFile names a file holding it); FRPPublicHost is the host
	// harnesses dial for proxied ports (default: FRPServer's host).
	FRPServer     string `json:"frp_server"`
	FRPToken      string `json:"-"`
	FRPTokenFile  string `json:"frp_token_file"`
	FRPPublicHost string `json:"frp_public_host"`

	// SSHServer is host:port of any SSH server allowing remote forwards.
	SSHServer     string `json:"ssh_server"`
	SSHUser       string `json:"ssh_user"`
	SSHKeyFile    string `json:"ssh_key_file"`
	SSHAgent      bool   `json:"ssh_agent"`
	SSHKnownHosts string `json:"ssh_known_hosts"`
	// SSHRemoteBind is where the server listens for the forward (default
	// 127.0.0.1; others need GatewayPorts); SSHPublicHost is the host
	// harnesses dial (default: SSHServer's host).
	SSHRemoteBind string `json:"ssh_remote_bind"`
	SSHPublicHost string `json:"ssh_public_host"`

	// GatewayToken enables the rollout gateway routes on the interception
	// servers for trainers presenting it (package interception/gateway).
	GatewayToken string `json:"-"`
	// GatewayAddr is the stable host:port the worker serves the gateway at
	// (register, trajectory, unregister, and the registered rollouts' model
	// routes below /v1/rollouts/{id}/); empty: only on the interception
	// servers' own ports. It needs GatewayToken.
	GatewayAddr string `json:"gateway_addr,omitempty"`
	// GatewayTTL is how long a gateway registration lives unless its
	// register call says otherwise (gateway.DefaultTTL when 0).
	GatewayTTL time.Duration `json:"gateway_ttl,omitempty"`

	// Use, when set, is the tunnel whatever Type says: for programs that
	// embed a worker and for tests.
	Use tunnel.Tunnel `json:"-"`

	// Warnings are what the worker says when it starts about how it was
	// configured (a deprecated flag).
	Warnings []string `json:"-"`
}

// DefaultMultiplex is how many rollouts share one interception server
// unless configured.
const DefaultMultiplex = 32

// multiplex is c.Multiplex or its default.
func (c Interception) multiplex() int {
	if c.Multiplex > 0 {
		return c.Multiplex
	}
	return DefaultMultiplex
}

// Validate reports a configuration that cannot work.
func (c Interception) Validate() error {
	if c.CreationsPerMinute < 0 {
		return fmt.Errorf("interception: creations per minute %d is negative", c.CreationsPerMinute)
	}
	if c.Multiplex < 0 {
		return fmt.Errorf("interception: multiplex %d: at least 1 rollout shares an interception server", c.Multiplex)
	}
	if c.GatewayAddr != "" && c.GatewayToken == "" {
		return fmt.Errorf("interception: --%s needs --interception.gateway-token (EVALFLOW_GATEWAY_TOKEN)", flagGatewayAddr)
	}
	_, err := c.tunnel(c.Multiplex != 0)
	return err
}

// Tunnel builds the tunnel for a runtime: loopback when the runtime is local
// (whatever the configured type, nothing is created), else the configured
// tunnel. The runtime's consumers of the interception server are its
// harnesses and, beside them in the same runtime, their tasks' tool servers
// and users (the /state and /task routes): one base URL serves them all,
// so the decision holds for every consumer.
func (c Interception) Tunnel(rt harness.Runtime) (tunnel.Tunnel, error) {
	t, err := c.tunnel(false)
	if err != nil {
		return nil, err
	}
	if !harness.IsRemote(rt) {
		return tunnel.Local{}, nil
	}
	if _, ok := t.(tunnel.Local); ok {
		return nil, errors.New("interception: a remote harness runtime cannot reach a local interception server; set --interception.type")
	}
	return t, nil
}

func (c Interception) tunnel(multiplexSet bool) (tunnel.Tunnel, error) {
	retry := tunnel.Retry{}
	if c.Attempts > 0 {
		retry = tunnel.DefaultRetry
		retry.Attempts = c.Attempts
	}
	if c.Use != nil {
		return c.Use, nil
	}
	switch c.Type {
	case "", InterceptionLocal:
		return tunnel.Local{}, nil
	case InterceptionCustom:
		if multiplexSet {
			return nil, errors.New("interception: custom is one shared server; multiplex does not apply")
		}
		t := tunnel.Custom{URL: c.URL, Port: c.Port}
		return t, t.Validate()
	case InterceptionFRP:
		host, port, err := splitHostPort(c.FRPServer, tunnel.DefaultFRPPort)
		if err != nil {
			return nil, fmt.Errorf("interception: frp server: %w", err)
		}
		token := c.FRPToken
		if c.FRPTokenFile != "" {
			b, err := os.ReadFile(c.FRPTokenFile)
			if err != nil {
				return nil, fmt.Errorf("interception: frp token file: %w", err)
			}
			token = strings.TrimSpace(string(b))
			if token == "" {
				return nil, fmt.Errorf("interception: frp token file %s is empty", c.FRPTokenFile)
			}
		}
		t := &tunnel.FRP{ServerAddr: host, ServerPort: port, Token: token, PublicHost: c.FRPPublicHost, Retry: retry, Limiter: c.limiter()}
		if err := t.Validate(); err != nil {
			if errors.Is(err, tunnel.ErrNoToken) {
				return nil, fmt.Errorf("%w (EVALFLOW_FRP_TOKEN or --interception.frp.token-file)", err)
			}
			return nil, err
		}
		return t, nil
	case InterceptionSSH:
		t := &tunnel.SSH{
			Addr: c.SSHServer, User: c.SSHUser, KeyFile: c.SSHKeyFile, UseAgent: c.SSHAgent,
			KnownHostsFile: c.SSHKnownHosts, RemoteBind: c.SSHRemoteBind, PublicHost: c.SSHPublicHost, Retry: retry,
			Limiter: c.limiter(),
		}
		if t.KnownHostsFile == "" {
			if home, err := os.UserHomeDir(); err == nil {
				t.KnownHostsFile = home + "/.ssh/known_hosts"
			}
		}
		return t, t.Validate()
	default:
		return nil, fmt.Errorf("interception: unknown type %q (want local, custom, frp or ssh)", c.Type)
	}
}

// limiter is the host-wide bound on the tunnels created, shared with the
// other workers of this host.
func (c Interception) limiter() *tunnel.HostLimiter {
	return tunnel.NewHostLimiter(c.CreationLimitFile, c.CreationsPerMinute)
}

func splitHostPort(s string, defaultPort int) (string, int, error) {
	if s == "" {
		return "", 0, errors.New("address is required")
	}
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return s, defaultPort, nil // no port: the default
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", p, err)
	}
	return host, port, nil
}
