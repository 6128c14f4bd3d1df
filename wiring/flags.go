package wiring

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/harness"
)

// Interception flag names; the worker binary and the starter's in-process
// worker share them.
const (
	flagInterceptionConfig = "interception.config"
	flagInterceptionType   = "interception.type"
	flagMultiplex          = "multiplex"
)

// InterceptionFlags are the flags that configure Interception. Values set on
// the command line or in the environment override the config file's.
func InterceptionFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: flagInterceptionConfig, EnvVars: []string{"EVALFLOW_INTERCEPTION_CONFIG"},
			Usage: "JSON file with the interception settings (keys as in wiring.Interception: type, url, port, frp_server, ssh_server, …)"},
		&cli.StringFlag{Name: flagInterceptionType, EnvVars: []string{"EVALFLOW_INTERCEPTION_TYPE"},
			Usage: "how remote harnesses reach the interception servers: local, custom, frp or ssh (local harnesses always use loopback)"},
		&cli.DurationFlag{Name: "interception.health-interval", EnvVars: []string{"EVALFLOW_INTERCEPTION_HEALTH_INTERVAL"},
			Usage: "how often every tunnel is checked end to end (default 30s)"},
		&cli.IntFlag{Name: "interception.creations-per-minute", EnvVars: []string{"EVALFLOW_TUNNEL_CREATIONS_PER_MINUTE"},
			Usage: "host-wide bound on tunnel creations (default 512)"},
		&cli.StringFlag{Name: "interception.gateway-token", EnvVars: []string{"EVALFLOW_GATEWAY_TOKEN"},
			Usage: "enables POST /v1/rollouts/{id}/register|unregister and GET …/trajectory for callers presenting this bearer token"},
		&cli.IntFlag{Name: "interception.attempts", Usage: "tunnel creation attempts per Expose before Temporal retries it (default 3)"},
		&cli.StringFlag{Name: "interception.url", Usage: "custom: the URL harnesses reach the shared server at"},
		&cli.IntFlag{Name: "interception.port", Usage: "custom: the fixed port the shared server listens on (all interfaces)"},
		&cli.StringFlag{Name: "interception.frp.server", EnvVars: []string{"EVALFLOW_FRP_SERVER"}, Usage: "frp: frps host[:port]"},
		&cli.StringFlag{Name: "interception.frp.token", EnvVars: []string{"EVALFLOW_FRP_TOKEN"}, Usage: "frp: frps token (prefer the env var or a token file)"},
		&cli.StringFlag{Name: "interception.frp.token-file", EnvVars: []string{"EVALFLOW_FRP_TOKEN_FILE"}, Usage: "frp: file holding the frps token"},
		&cli.StringFlag{Name: "interception.frp.public-host", Usage: "frp: host harnesses dial for proxied ports (default: the frps host)"},
		&cli.StringFlag{Name: "interception.ssh.server", EnvVars: []string{"EVALFLOW_SSH_SERVER"}, Usage: "ssh: SSH server host:port"},
		&cli.StringFlag{Name: "interception.ssh.user", EnvVars: []string{"EVALFLOW_SSH_USER"}, Usage: "ssh: user"},
		&cli.StringFlag{Name: "interception.ssh.key-file", EnvVars: []string{"EVALFLOW_SSH_KEY_FILE"}, Usage: "ssh: private key file"},
		&cli.BoolFlag{Name: "interception.ssh.agent", Usage: "ssh: also offer the keys of the agent at $SSH_AUTH_SOCK"},
		&cli.StringFlag{Name: "interception.ssh.known-hosts", EnvVars: []string{"EVALFLOW_SSH_KNOWN_HOSTS"}, Usage: "ssh: known_hosts file (default ~/.ssh/known_hosts)"},
		&cli.StringFlag{Name: "interception.ssh.remote-bind", Usage: "ssh: address the server binds forwards on (default 127.0.0.1; others need GatewayPorts)"},
		&cli.StringFlag{Name: "interception.ssh.public-host", Usage: "ssh: host harnesses dial for forwarded ports (default: the SSH server host)"},
	}
}

// InterceptionFromFlags reads the config file, then the flags that are set,
// and validates the result.
func InterceptionFromFlags(cctx *cli.Context) (Interception, error) {
	var c Interception
	if path := cctx.String(flagInterceptionConfig); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return c, fmt.Errorf("interception config: %w", err)
		}
		if err := json.Unmarshal(b, &c); err != nil {
			return c, fmt.Errorf("interception config %s: %w", path, err)
		}
	}
	str := func(name string, dst *string) {
		if cctx.IsSet(name) {
			*dst = cctx.String(name)
		}
	}
	num := func(name string, dst *int) {
		if cctx.IsSet(name) {
			*dst = cctx.Int(name)
		}
	}
	str(flagInterceptionType, &c.Type)
	if cctx.IsSet("interception.health-interval") {
		c.HealthInterval = cctx.Duration("interception.health-interval")
	}
	num("interception.creations-per-minute", &c.CreationsPerMinute)
	num("interception.attempts", &c.Attempts)
	str("interception.gateway-token", &c.GatewayToken)
	str("interception.url", &c.URL)
	num("interception.port", &c.Port)
	str("interception.frp.server", &c.FRPServer)
	str("interception.frp.token", &c.FRPToken)
	str("interception.frp.token-file", &c.FRPTokenFile)
	str("interception.frp.public-host", &c.FRPPublicHost)
	str("interception.ssh.server", &c.SSHServer)
	str("interception.ssh.user", &c.SSHUser)
	str("interception.ssh.key-file", &c.SSHKeyFile)
	if cctx.IsSet("interception.ssh.agent") {
		c.SSHAgent = cctx.Bool("interception.ssh.agent")
	}
	str("interception.ssh.known-hosts", &c.SSHKnownHosts)
	str("interception.ssh.remote-bind", &c.SSHRemoteBind)
	str("interception.ssh.public-host", &c.SSHPublicHost)
	if err := c.Validate(cctx.IsSet(flagMultiplex)); err != nil {
		return c, err
	}
	return c, nil
}

// Runtime kinds the CLIs offer.
const (
	RuntimeLocal  = "local"
	RuntimeNetns  = "netns"
	RuntimeDocker = "docker"
)

// RuntimeFlags are the flags that pick the harness runtime.
func RuntimeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "runtime", Value: RuntimeLocal, EnvVars: []string{"EVALFLOW_RUNTIME"},
			Usage: "where harnesses run: local (subprocesses), netns (subprocesses in a network namespace that only a tunnel connects; root) or docker"},
		&cli.StringFlag{Name: "runtime.netns-subnet", Value: "10.213.0.0", Usage: "netns: the /30 joining the namespace to this host"},
		&cli.StringFlag{Name: "runtime.docker-image", EnvVars: []string{"EVALFLOW_DOCKER_IMAGE"}, Usage: "docker: image holding the harness command"},
		&cli.StringFlag{Name: "runtime.docker-network", Usage: "docker: container network (default: docker's)"},
		&cli.BoolFlag{Name: "runtime.docker-host-gateway", Usage: "docker: map host.docker.internal to this host (for a custom interception URL on it)"},
	}
}

// RuntimeFromFlags builds the harness runtime the flags ask for; workDir is
// the parent of harness workdirs. Call the returned close when the worker
// has stopped.
func RuntimeFromFlags(cctx *cli.Context, workDir string) (harness.Runtime, func() error, error) {
	local := harness.Local{Dir: workDir}
	switch kind := cctx.String("runtime"); kind {
	case "", RuntimeLocal:
		return &local, func() error { return nil }, nil
	case RuntimeNetns:
		n, err := harness.NewNetns(cctx.Context, cctx.String("runtime.netns-subnet"), local)
		if err != nil {
			return nil, nil, fmt.Errorf("netns runtime: %w", err)
		}
		return n, n.Close, nil
	case RuntimeDocker:
		d := &harness.Docker{
			Image: cctx.String("runtime.docker-image"), Network: cctx.String("runtime.docker-network"),
			HostGateway: cctx.Bool("runtime.docker-host-gateway"), Local: local,
		}
		if d.Image == "" {
			return nil, nil, errors.New("docker runtime: --runtime.docker-image is required")
		}
		return d, func() error { return nil }, nil
	default:
		return nil, nil, fmt.Errorf("unknown runtime %q (want local, netns or docker)", kind)
	}
}
