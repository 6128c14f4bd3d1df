package wiring

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/internal/engine"
	"github.com/evalflow/evalflow/internal/harness/auto"
	"github.com/evalflow/evalflow/internal/harness/container"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/internal/prices"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/providers/mock"
)

// Names of the worker flags the binaries read besides ConfigFromFlags.
const (
	FlagAddress   = "address"
	FlagNamespace = "namespace"
	FlagTaskQueue = "task-queue"
	FlagRunsDir   = "runs-dir"
	FlagStore     = "store"
	FlagBaseURL   = "base-url"
	FlagLogLevel  = "log-level"
	FlagLogFormat = "log-format"
	// FlagMetricsAddr is where a worker serves Prometheus metrics.
	FlagMetricsAddr = "metrics-addr"
)

// Names of the other worker flags.
const (
	flagAPIKeyEnv              = "api-key-env"
	flagUpstreamDialect        = "upstream-dialect"
	flagMaxRollouts            = "max-rollouts"
	flagWorkerRollouts         = "worker-rollouts" // the starter's former name of max-rollouts
	flagWorkDir                = "work-dir"
	flagMockLatency            = "mock-latency"
	flagMockErrorRate          = "mock-error-rate"
	flagMockScript             = "mock-script"
	flagMockTokenMerge         = "mock-token-merge"
	flagUpstreamHeaderTimeout  = "upstream-header-timeout"
	flagUpstreamIdleTimeout    = "upstream-idle-timeout"
	flagUpstreamMinConcurrency = "upstream-min-concurrency"
	flagUpstreamMaxConcurrency = "upstream-max-concurrency"
	flagBodyReadTimeout        = "interception.body-read-timeout"
	flagInterceptionConfig     = "interception.config"
	flagInterceptionType       = "interception.type"
	flagMultiplex              = "interception.multiplex"
	flagMultiplexFormer        = "multiplex" // the former name of interception.multiplex
	flagHarnessCache           = "harness-cache"
	flagGatewayAddr            = "gateway-addr"
	flagGatewayTTL             = "gateway-ttl"
	flagSkipUnsupported        = "runtime.skip-unsupported"
	flagProvider               = "provider"
	flagClaudeModel            = "claude-model"
	flagPrices                 = "prices"
)

// ClientFlags are the flags that say which Temporal namespace to talk to.
func ClientFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: FlagAddress, Value: "localhost:7233", EnvVars: []string{"EVALFLOW_ADDRESS", "TEMPORAL_ADDRESS"},
			Usage: "Temporal frontend host:port (given, it must answer: the starter starts an embedded server only when no address is given, or with --embedded)"},
		&cli.StringFlag{Name: FlagNamespace, Value: "default", EnvVars: []string{"EVALFLOW_NAMESPACE", "TEMPORAL_NAMESPACE"},
			Usage: "Temporal namespace"},
		&cli.BoolFlag{Name: FlagTLS, EnvVars: []string{"EVALFLOW_TLS", "TEMPORAL_TLS"},
			Usage: "connect to Temporal over TLS with the system's roots (implied by every --tls-* flag and by --api-key)"},
		&cli.StringFlag{Name: FlagTLSCert, EnvVars: []string{"EVALFLOW_TLS_CERT", "TEMPORAL_TLS_CERT"},
			Usage: "PEM file of the client certificate for mTLS to Temporal (with --tls-key)"},
		&cli.StringFlag{Name: FlagTLSKey, EnvVars: []string{"EVALFLOW_TLS_KEY", "TEMPORAL_TLS_KEY"},
			Usage: "PEM file of the client certificate's private key (never logged)"},
		&cli.StringFlag{Name: FlagTLSCA, EnvVars: []string{"EVALFLOW_TLS_CA", "TEMPORAL_TLS_CA"},
			Usage: "PEM file of the CA that signed the Temporal frontend's certificate (default: the system's roots)"},
		&cli.StringFlag{Name: FlagTLSServerName, EnvVars: []string{"EVALFLOW_TLS_SERVER_NAME", "TEMPORAL_TLS_SERVER_NAME"},
			Usage: "name the frontend's certificate is checked against, when not --address's host"},
		&cli.StringFlag{Name: FlagAPIKey, EnvVars: []string{"EVALFLOW_TEMPORAL_API_KEY", "TEMPORAL_API_KEY"},
			Usage: "Temporal Cloud API key, sent as a bearer token over TLS; prefer the environment variable (never logged)"},
	}
}

// StoreFlags are the flags that locate the run store.
func StoreFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: FlagRunsDir, Value: "runs", EnvVars: []string{"EVALFLOW_RUNS_DIR"},
			Usage: "run store: <runs-dir>/<run-id>/ holds rollouts.jsonl, traces and summary.json (workers of one run share it)"},
		&cli.StringFlag{Name: FlagStore, EnvVars: []string{"EVALFLOW_STORE"},
			Usage: "run store in PostgreSQL, postgres://user:password@host:port/db, for workers that share no filesystem (empty: files under --runs-dir); the same on every worker and the starter"},
	}
}

// LogFlags are the flags that shape a binary's log; see NewLogHandler.
func LogFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: FlagLogLevel, Value: "info", EnvVars: []string{"EVALFLOW_LOG_LEVEL"},
			Usage: "least severe log level written: debug, info, warn or error"},
		&cli.StringFlag{Name: FlagLogFormat, Value: "text", EnvVars: []string{"EVALFLOW_LOG_FORMAT"},
			Usage: "log format: text or json"},
	}
}

// WorkerFlags are every flag of a worker: the worker binary's whole set, and
// the part of the starter's run commands that configures their in-process
// worker. ConfigFromFlags reads them.
func WorkerFlags() []cli.Flag {
	flags := append(append(append(ClientFlags(), StoreFlags()...), LogFlags()...),
		&cli.StringFlag{Name: FlagTaskQueue, Value: DefaultTaskQueue, EnvVars: []string{"EVALFLOW_TASK_QUEUE"},
			Usage: "task queue runs are started on and workers poll"},
		&cli.StringFlag{Name: FlagBaseURL, EnvVars: []string{"EVALFLOW_BASE_URL", "OPENAI_BASE_URL"},
			Usage: "the provider, e.g. https://api.openai.com/v1 (empty: the offline mock model)"},
		&cli.StringFlag{Name: flagAPIKeyEnv, EnvVars: []string{"EVALFLOW_API_KEY_ENV"},
			Usage: "name of the environment variable holding the provider's API key; the key never leaves the worker (default OPENAI_API_KEY, or ANTHROPIC_API_KEY with --upstream-dialect anthropic)"},
		&cli.StringFlag{Name: flagUpstreamDialect, Value: "chat", EnvVars: []string{"EVALFLOW_UPSTREAM_DIALECT"},
			Usage: "wire format of the provider: chat, responses or anthropic (calls in another dialect are translated)"},
		&cli.StringSliceFlag{Name: flagProvider, EnvVars: []string{"EVALFLOW_PROVIDERS"},
			Usage: "a named provider for runs' roles (--role), NAME=URL or NAME=DIALECT:URL (chat, responses or anthropic), repeatable; its API key is read from EVALFLOW_PROVIDER_<NAME>_API_KEY, never a flag; the worker's own provider is named default"},
		&cli.StringSliceFlag{Name: flagClaudeModel, EnvVars: []string{"EVALFLOW_CLAUDE_MODELS"},
			Usage: "NAME=CLAUDE: a model name (an alias of the provider's) is that Claude model, for what calls translated to an anthropic provider ask of it (adaptive thinking or a thinking budget, structured outputs); repeatable"},
		&cli.IntFlag{Name: flagMaxRollouts, Value: defaultMaxRollouts, EnvVars: []string{"EVALFLOW_MAX_ROLLOUTS"},
			Usage: "rollouts one worker runs at once"},
		&cli.IntFlag{Name: flagWorkerRollouts, Hidden: true, Usage: "former name of --max-rollouts"},
		&cli.StringFlag{Name: flagWorkDir, EnvVars: []string{"EVALFLOW_WORK_DIR"},
			Usage: "parent of harness workdirs (default: the system temp dir)"},
		&cli.StringFlag{Name: flagHarnessCache, EnvVars: []string{"EVALFLOW_HARNESS_CACHE"},
			Usage: "where packaged harnesses (codex, claude-code) are installed with npm, once per version (default ~/.cache/evalflow/harnesses)"},
		&cli.DurationFlag{Name: flagMockLatency, EnvVars: []string{"EVALFLOW_MOCK_LATENCY"},
			Usage: "added latency of each mock model response"},
		&cli.Float64Flag{Name: flagMockErrorRate, Value: 0.1, EnvVars: []string{"EVALFLOW_MOCK_ERROR_RATE"},
			Usage: "fraction of deliberately wrong mock model answers"},
		&cli.StringFlag{Name: flagMockScript, EnvVars: []string{"EVALFLOW_MOCK_SCRIPT"},
			Usage: "a JSONL file scripting the mock model per task (tool calls, then a final answer; see providers/mock), for tests and demos"},
		&cli.BoolFlag{Name: flagMockTokenMerge, EnvVars: []string{"EVALFLOW_MOCK_TOKEN_MERGE"},
			Usage: "the mock model re-tokenizes an assistant message's letter pairs as one id each, so a turn's prompt ids do not extend the ids sampled before (what --token-in fixes), for tests and demos"},
		&cli.DurationFlag{Name: flagUpstreamHeaderTimeout, Value: providers.DefaultResponseHeaderTimeout, EnvVars: []string{"EVALFLOW_UPSTREAM_HEADER_TIMEOUT"},
			Usage: "longest wait for the provider's answer to begin, per attempt; past it the attempt failed and is retried"},
		&cli.DurationFlag{Name: flagUpstreamIdleTimeout, Value: providers.DefaultStreamIdleTimeout, EnvVars: []string{"EVALFLOW_UPSTREAM_IDLE_TIMEOUT"},
			Usage: "longest gap between the provider's stream events (or body reads)"},
		&cli.IntFlag{Name: flagUpstreamMinConcurrency, Value: providers.DefaultMinConcurrency, EnvVars: []string{"EVALFLOW_UPSTREAM_MIN_CONCURRENCY"},
			Usage: "least model calls in flight the adaptive limit keeps while the provider answers 429"},
		&cli.IntFlag{Name: flagUpstreamMaxConcurrency, Value: providers.DefaultMaxConcurrency, EnvVars: []string{"EVALFLOW_UPSTREAM_MAX_CONCURRENCY"},
			Usage: "most model calls in flight to the provider from this worker (the adaptive limit starts here)"},
		&cli.StringFlag{Name: FlagMetricsAddr, EnvVars: []string{"EVALFLOW_METRICS_ADDR"},
			Usage: "host:port to serve Prometheus metrics at /metrics: rollouts, model calls, tunnels and the Temporal SDK's own (empty: off)"},
		&cli.DurationFlag{Name: flagBodyReadTimeout, Value: interception.DefaultBodyReadTimeout, EnvVars: []string{"EVALFLOW_BODY_READ_TIMEOUT"},
			Usage: "longest time a harness may take to send a request body to the interception server (408 after)"},
		&cli.StringFlag{Name: flagPrices, EnvVars: []string{"EVALFLOW_PRICES"},
			Usage: "YAML or JSON file of model prices in USD per million tokens (input, cached_input, cache_write, output), merged over the bundled table; each turn's cost is priced with it"},
	)
	flags = append(flags, RuntimeFlags()...)
	return append(flags, InterceptionFlags()...)
}

// ConfigFromFlags builds a worker's configuration from the flags of
// WorkerFlags: the one mapping both binaries use. The caller sets Logger,
// and calls close once the worker has stopped (it removes what the harness
// runtime set up).
func ConfigFromFlags(cctx *cli.Context) (cfg Config, closeRuntime func() error, err error) {
	maxRollouts := cctx.Int(flagMaxRollouts)
	if !cctx.IsSet(flagMaxRollouts) && cctx.IsSet(flagWorkerRollouts) {
		maxRollouts = cctx.Int(flagWorkerRollouts)
	}
	switch rate := cctx.Float64(flagMockErrorRate); {
	case maxRollouts < 1:
		return cfg, nil, fmt.Errorf("--%s %d: a worker runs at least 1 rollout at once", flagMaxRollouts, maxRollouts)
	case rate < 0 || rate > 1:
		return cfg, nil, fmt.Errorf("--%s %v: want a fraction from 0 to 1", flagMockErrorRate, rate)
	case cctx.Duration(flagMockLatency) < 0:
		return cfg, nil, fmt.Errorf("--%s %v is negative", flagMockLatency, cctx.Duration(flagMockLatency))
	case cctx.Duration(flagUpstreamHeaderTimeout) <= 0, cctx.Duration(flagUpstreamIdleTimeout) <= 0, cctx.Duration(flagBodyReadTimeout) <= 0:
		return cfg, nil, fmt.Errorf("--%s, --%s and --%s must be positive", flagUpstreamHeaderTimeout, flagUpstreamIdleTimeout, flagBodyReadTimeout)
	case cctx.Int(flagUpstreamMinConcurrency) < 1 || cctx.Int(flagUpstreamMaxConcurrency) < cctx.Int(flagUpstreamMinConcurrency):
		return cfg, nil, fmt.Errorf("--%s %d and --%s %d: want 1 ≤ min ≤ max", flagUpstreamMinConcurrency, cctx.Int(flagUpstreamMinConcurrency),
			flagUpstreamMaxConcurrency, cctx.Int(flagUpstreamMaxConcurrency))
	}
	// Checked here too, so that a binary refuses a store it cannot write
	// before it dials Temporal.
	store := StoreFromFlags(cctx)
	if err := store.check(); err != nil {
		return cfg, nil, err
	}
	if store.URL == "" {
		if _, err := openFiles(store.dir()); err != nil {
			return cfg, nil, err
		}
	}
	named, err := parseProviders(cctx.StringSlice(flagProvider))
	if err != nil {
		return cfg, nil, err
	}
	claude, err := parseClaudeModels(cctx.StringSlice(flagClaudeModel))
	if err != nil {
		return cfg, nil, err
	}
	ic, err := InterceptionFromFlags(cctx)
	if err != nil {
		return cfg, nil, err
	}
	table, err := prices.Load(cctx.String(flagPrices))
	if err != nil {
		return cfg, nil, err
	}
	rt, closeRuntime, err := RuntimeFromFlags(cctx, cctx.String(flagWorkDir))
	if err != nil {
		return cfg, nil, err
	}
	return Config{
		TaskQueue:       cctx.String(FlagTaskQueue),
		RunsDir:         cctx.String(FlagRunsDir),
		StoreURL:        store.URL,
		BaseURL:         cctx.String(FlagBaseURL),
		APIKeyEnv:       cctx.String(flagAPIKeyEnv),
		UpstreamDialect: cctx.String(flagUpstreamDialect),
		Providers:       named,
		ClaudeModels:    claude,
		Mock: mock.Config{
			Latency:    cctx.Duration(flagMockLatency),
			ErrorRate:  cctx.Float64(flagMockErrorRate),
			Script:     cctx.String(flagMockScript),
			TokenMerge: cctx.Bool(flagMockTokenMerge),
		},
		Upstream: UpstreamLimits{
			HeaderTimeout:  cctx.Duration(flagUpstreamHeaderTimeout),
			IdleTimeout:    cctx.Duration(flagUpstreamIdleTimeout),
			MinConcurrency: cctx.Int(flagUpstreamMinConcurrency),
			MaxConcurrency: cctx.Int(flagUpstreamMaxConcurrency),
		},
		BodyReadTimeout: cctx.Duration(flagBodyReadTimeout),
		Prices:          table,
		MaxRollouts:     maxRollouts,
		Multiplex:       ic.multiplex(),
		WorkDir:         cctx.String(flagWorkDir),
		HarnessCache:    cctx.String(flagHarnessCache),
		Runtime:         rt,
		SkipUnsupported: cctx.Bool(flagSkipUnsupported),
		Interception:    ic,
		MetricsAddr:     cctx.String(FlagMetricsAddr),
		Namespace:       cctx.String(FlagNamespace),
	}, closeRuntime, nil
}

// InterceptionFlags are the flags that configure Interception. Values set on
// the command line or in the environment override the config file's.
func InterceptionFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: flagInterceptionConfig, EnvVars: []string{"EVALFLOW_INTERCEPTION_CONFIG"},
			Usage: "JSON file with the interception settings (keys as in wiring.Interception: type, url, port, frp_server, ssh_server, …)"},
		&cli.StringFlag{Name: flagInterceptionType, EnvVars: []string{"EVALFLOW_INTERCEPTION_TYPE"},
			Usage: "how remote harnesses reach the interception servers: local, custom, frp or ssh (local harnesses always use loopback)"},
		&cli.IntFlag{Name: flagMultiplex, EnvVars: []string{"EVALFLOW_INTERCEPTION_MULTIPLEX"},
			Usage: "rollouts sharing one interception server and its tunnel (default 32; not for custom, which is one shared server)"},
		&cli.IntFlag{Name: flagMultiplexFormer, EnvVars: []string{"EVALFLOW_MULTIPLEX"},
			Usage: "deprecated: the former name of --interception.multiplex"},
		&cli.DurationFlag{Name: "interception.health-interval", EnvVars: []string{"EVALFLOW_INTERCEPTION_HEALTH_INTERVAL"},
			Usage: "how often every tunnel is checked end to end (default 30s)"},
		&cli.IntFlag{Name: "interception.creations-per-minute", EnvVars: []string{"EVALFLOW_TUNNEL_CREATIONS_PER_MINUTE"},
			Usage: "host-wide bound on tunnel creations, shared by the workers of this host (default 512)"},
		&cli.StringFlag{Name: "interception.creation-limit-file", EnvVars: []string{"EVALFLOW_TUNNEL_LIMIT_FILE"},
			Usage: "the file (flock'd token bucket) through which the workers of a host share --interception.creations-per-minute (default $XDG_RUNTIME_DIR/evalflow/tunnel-limit, else /tmp/evalflow-<uid>/tunnel-limit)"},
		&cli.StringFlag{Name: "interception.gateway-token", EnvVars: []string{"EVALFLOW_GATEWAY_TOKEN"},
			Usage: "enables POST /v1/rollouts/{id}/register|unregister and GET …/trajectory for callers presenting this bearer token"},
		&cli.StringFlag{Name: flagGatewayAddr, EnvVars: []string{"EVALFLOW_GATEWAY_ADDR"},
			Usage: "host:port to serve the rollout gateway at, a stable address for trainers (needs --interception.gateway-token; empty: only on the interception servers' ports)"},
		&cli.DurationFlag{Name: flagGatewayTTL, EnvVars: []string{"EVALFLOW_GATEWAY_TTL"},
			Usage: "how long a gateway registration lives unless unregistered or its register call says otherwise (default 4h)"},
		&cli.IntFlag{Name: "interception.attempts", EnvVars: []string{"EVALFLOW_INTERCEPTION_ATTEMPTS"}, Usage: "tunnel creation attempts per Expose before Temporal retries it (default 3)"},
		&cli.StringFlag{Name: "interception.url", EnvVars: []string{"EVALFLOW_INTERCEPTION_URL"}, Usage: "custom: the URL harnesses reach the shared server at"},
		&cli.IntFlag{Name: "interception.port", EnvVars: []string{"EVALFLOW_INTERCEPTION_PORT"}, Usage: "custom: the fixed port the shared server listens on (all interfaces)"},
		&cli.StringFlag{Name: "interception.frp.server", EnvVars: []string{"EVALFLOW_FRP_SERVER"}, Usage: "frp: frps host[:port]"},
		&cli.StringFlag{Name: "interception.frp.token", EnvVars: []string{"EVALFLOW_FRP_TOKEN"}, Usage: "frp: frps token (prefer the env var or a token file)"},
		&cli.StringFlag{Name: "interception.frp.token-file", EnvVars: []string{"EVALFLOW_FRP_TOKEN_FILE"}, Usage: "frp: file holding the frps token"},
		&cli.StringFlag{Name: "interception.frp.public-host", EnvVars: []string{"EVALFLOW_FRP_PUBLIC_HOST"}, Usage: "frp: host harnesses dial for proxied ports (default: the frps host)"},
		&cli.StringFlag{Name: "interception.ssh.server", EnvVars: []string{"EVALFLOW_SSH_SERVER"}, Usage: "ssh: SSH server host:port"},
		&cli.StringFlag{Name: "interception.ssh.user", EnvVars: []string{"EVALFLOW_SSH_USER"}, Usage: "ssh: user"},
		&cli.StringFlag{Name: "interception.ssh.key-file", EnvVars: []string{"EVALFLOW_SSH_KEY_FILE"}, Usage: "ssh: private key file"},
		&cli.BoolFlag{Name: "interception.ssh.agent", EnvVars: []string{"EVALFLOW_SSH_AGENT"}, Usage: "ssh: also offer the keys of the agent at $SSH_AUTH_SOCK"},
		&cli.StringFlag{Name: "interception.ssh.known-hosts", EnvVars: []string{"EVALFLOW_SSH_KNOWN_HOSTS"}, Usage: "ssh: known_hosts file (default ~/.ssh/known_hosts)"},
		&cli.StringFlag{Name: "interception.ssh.remote-bind", EnvVars: []string{"EVALFLOW_SSH_REMOTE_BIND"}, Usage: "ssh: address the server binds forwards on (default 127.0.0.1; others need GatewayPorts)"},
		&cli.StringFlag{Name: "interception.ssh.public-host", EnvVars: []string{"EVALFLOW_SSH_PUBLIC_HOST"}, Usage: "ssh: host harnesses dial for forwarded ports (default: the SSH server host)"},
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
	if err := multiplexFromFlags(cctx, &c); err != nil {
		return c, err
	}
	if cctx.IsSet("interception.health-interval") {
		c.HealthInterval = cctx.Duration("interception.health-interval")
	}
	num("interception.creations-per-minute", &c.CreationsPerMinute)
	str("interception.creation-limit-file", &c.CreationLimitFile)
	num("interception.attempts", &c.Attempts)
	str("interception.gateway-token", &c.GatewayToken)
	str(flagGatewayAddr, &c.GatewayAddr)
	if cctx.IsSet(flagGatewayTTL) {
		c.GatewayTTL = cctx.Duration(flagGatewayTTL)
	}
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
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}

// multiplexFromFlags sets c.Multiplex from --interception.multiplex, over
// the config file's, or from its former name --multiplex, which may not
// say otherwise than the new name.
func multiplexFromFlags(cctx *cli.Context, c *Interception) error {
	from := "the interception config's multiplex"
	if cctx.IsSet(flagMultiplex) {
		c.Multiplex, from = cctx.Int(flagMultiplex), "--"+flagMultiplex
	}
	if cctx.IsSet(flagMultiplexFormer) {
		v := cctx.Int(flagMultiplexFormer)
		if c.Multiplex != 0 && c.Multiplex != v {
			return fmt.Errorf("--%s %d and %s %d disagree: --%s is the former name of --%s; give only --%s",
				flagMultiplexFormer, v, from, c.Multiplex, flagMultiplexFormer, flagMultiplex, flagMultiplex)
		}
		c.Multiplex, from = v, "--"+flagMultiplexFormer
		c.Warnings = append(c.Warnings, fmt.Sprintf("--%s (EVALFLOW_MULTIPLEX) is deprecated: use --%s (EVALFLOW_INTERCEPTION_MULTIPLEX) or multiplex in the --%s file",
			flagMultiplexFormer, flagMultiplex, flagInterceptionConfig))
	}
	flagged := cctx.IsSet(flagMultiplex) || cctx.IsSet(flagMultiplexFormer)
	if c.Multiplex < 0 || flagged && c.Multiplex == 0 {
		return fmt.Errorf("%s %d: at least 1 rollout shares an interception server", from, c.Multiplex)
	}
	return nil
}

// Runtime kinds the CLIs offer.
const (
	RuntimeAuto   = "auto"
	RuntimeLocal  = "local"
	RuntimeNetns  = "netns"
	RuntimeDocker = "docker"
	RuntimeBwrap  = "bwrap"
)

// RuntimeFlags are the flags that pick the harness runtime.
func RuntimeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "runtime", Value: RuntimeAuto, EnvVars: []string{"EVALFLOW_RUNTIME"},
			Usage: "where harnesses run: auto (a task with an environment in a container when an engine answers at DOCKER_HOST, else in bwrap; other tasks locally), " +
				"docker (a container per rollout from the task's own image, on the Docker Engine API at DOCKER_HOST: Docker or Podman), " +
				"bwrap (bubblewrap sandboxes: the host's system read-only, the task's workspace at /app), local (subprocesses) or " +
				"netns (subprocesses in a network namespace that only a tunnel connects; root)"},
		&cli.BoolFlag{Name: "runtime.bwrap-isolate-net", EnvVars: []string{"EVALFLOW_BWRAP_ISOLATE_NET"},
			Usage: "bwrap: no way out of a sandbox's network namespace, not even to the interception: harnesses then need a tunnel into it, as with netns"},
		&cli.BoolFlag{Name: "runtime.bwrap-host-net", EnvVars: []string{"EVALFLOW_BWRAP_HOST_NET"},
			Usage: "bwrap: share this host's network with the sandboxes (its loopback and every service on it) rather than give each a namespace of its own whose one way out is the interception"},
		&cli.StringFlag{Name: "runtime.netns-subnet", Value: "10.213.0.0", EnvVars: []string{"EVALFLOW_NETNS_SUBNET"}, Usage: "netns: the /30 joining the namespace to this host"},
		&cli.StringFlag{Name: "runtime.docker-image", EnvVars: []string{"EVALFLOW_DOCKER_IMAGE"}, Usage: "docker: the image of the tasks that name none (default " + container.DefaultImage + ")"},
		&cli.StringFlag{Name: "runtime.docker-network", EnvVars: []string{"EVALFLOW_DOCKER_NETWORK"},
			Usage: "docker: how sandboxes of tasks that allow the internet reach it: slirp4netns, or an engine network (created when missing); default slirp4netns on Podman, else " + container.DefaultBridge},
		&cli.IntFlag{Name: "runtime.keep-images", Value: container.DefaultKeepImages, EnvVars: []string{"EVALFLOW_KEEP_IMAGES"},
			Usage: "docker: how many images built for tasks to keep on the engine, the most recent (never one in use or built within a day); -1: no bound"},
		&cli.StringFlag{Name: "runtime.pull", Value: container.PullMissing, EnvVars: []string{"EVALFLOW_PULL"}, Usage: "docker: pull an image a task names when the engine lacks it (missing), or never"},
		&cli.BoolFlag{Name: flagSkipUnsupported, EnvVars: []string{"EVALFLOW_SKIP_UNSUPPORTED"},
			Usage: "local, netns, bwrap: skip the Dockerfile lines they cannot carry out (RUN, other build stages) instead of refusing the task"},
	}
}

// RuntimeFromFlags builds the harness runtime the flags ask for; workDir is
// the parent of harness workdirs. Call the returned close when the worker
// has stopped.
func RuntimeFromFlags(cctx *cli.Context, workDir string) (harness.Runtime, func() error, error) {
	host := local.Runtime{Dir: workDir}
	none := func() error { return nil }
	switch kind := cctx.String("runtime"); kind {
	case RuntimeLocal:
		return &host, none, nil
	case RuntimeNetns:
		n, err := local.NewNetns(cctx.Context, cctx.String("runtime.netns-subnet"), host)
		if err != nil {
			return nil, nil, fmt.Errorf("netns runtime: %w", err)
		}
		return n, n.Close, nil
	case RuntimeDocker:
		c, err := containerRuntime(cctx, workDir)
		if err != nil {
			return nil, nil, fmt.Errorf("docker runtime: %w", err)
		}
		return c, closeContainers(c), nil
	case RuntimeBwrap:
		if _, err := exec.LookPath("bwrap"); err != nil {
			return nil, nil, errors.New("bwrap runtime: bwrap is not installed (install the bubblewrap package)")
		}
		return bwrapRuntime(cctx, host), none, nil
	case "", RuntimeAuto:
		a := &auto.Runtime{Local: &host, Options: harness.PrepareOptions{SkipUnsupported: cctx.Bool(flagSkipUnsupported)}}
		if _, err := exec.LookPath("bwrap"); err == nil {
			a.Isolated = bwrapRuntime(cctx, host)
		}
		c, err := containerRuntime(cctx, workDir)
		if err != nil {
			a.NoEngine = err.Error()
			return a, none, nil
		}
		a.Sandboxes = c
		return a, closeContainers(c), nil
	default:
		return nil, nil, fmt.Errorf("unknown runtime %q (want auto, docker, bwrap, local or netns)", kind)
	}
}

// bwrapRuntime is the bubblewrap runtime the flags ask for, its sandboxes'
// forwarder the built-in agent (or, without a lean one, this binary).
func bwrapRuntime(cctx *cli.Context, host local.Runtime) *local.Bwrap {
	b := &local.Bwrap{IsolateNet: cctx.Bool("runtime.bwrap-isolate-net"), HostNet: cctx.Bool("runtime.bwrap-host-net"), Local: host}
	if agent, _, err := builtinAgent(); err == nil {
		b.Agent = agent[0]
	}
	return b
}

// containerRuntime is the container runtime on the engine DOCKER_HOST
// names, with the built-in agent program to mount into its sandboxes.
func containerRuntime(cctx *cli.Context, workDir string) (*container.Runtime, error) {
	pull := cctx.String("runtime.pull")
	if pull != container.PullMissing && pull != container.PullNever {
		return nil, fmt.Errorf("--runtime.pull %q: want missing or never", pull)
	}
	eng, err := engine.FromEnv()
	if err != nil {
		return nil, err
	}
	agent, lean, err := builtinAgent()
	if err != nil {
		return nil, err
	}
	if !lean {
		return nil, fmt.Errorf("the container runtime mounts the evalflow-agent program into its sandboxes, and none was found (make build puts it beside the binaries; or set %s)", AgentEnv)
	}
	ctx, cancel := context.WithTimeout(cctx.Context, 5*time.Second)
	defer cancel()
	c, err := container.New(ctx, eng, agent[0])
	if err != nil {
		return nil, err
	}
	c.Image, c.Pull, c.Dir = cctx.String("runtime.docker-image"), pull, workDir
	c.KeepImages = cctx.Int("runtime.keep-images")
	c.Network = cctx.String("runtime.docker-network")
	host, _ := os.Hostname()
	c.Worker = fmt.Sprintf("%s:%d", host, os.Getpid())
	return c, nil
}

// closeContainers removes the sandboxes the worker still has when it stops.
func closeContainers(c *container.Runtime) func() error {
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return c.Close(ctx)
	}
}
