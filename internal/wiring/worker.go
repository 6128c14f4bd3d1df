// Package wiring builds an evalflow worker from its configuration. Both the
// worker binary and the starter's in-process worker use it, so nothing is
// wired twice.
package wiring

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/evalflow/evalflow/activities"
	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/internal/harness/auto"
	"github.com/evalflow/evalflow/internal/harness/container"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/internal/harness/packaged"
	"github.com/evalflow/evalflow/internal/metrics"
	"github.com/evalflow/evalflow/internal/prices"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/tunnel"
	"github.com/evalflow/evalflow/workflows"
)

// DefaultTaskQueue is the shared task queue runs are started on.
const DefaultTaskQueue = "evalflow"

// EvalWorkflowName is the registered name of workflows.Eval.
const EvalWorkflowName = workflows.EvalName

// Config configures a worker. It holds the name of the API key's
// environment variable, never the key.
type Config struct {
	TaskQueue string
	// RunsDir is the files run store's root ("runs" if empty).
	RunsDir string
	// StoreURL, when set, is the PostgreSQL run store
	// (postgres://user:password@host/db) used instead of RunsDir, for
	// workers that share no filesystem. It holds a password: never logged.
	StoreURL string `json:"-"`
	// BaseURL is an OpenAI-compatible provider (…/v1). Empty: the offline mock model.
	BaseURL string
	// APIKeyEnv names the environment variable holding the provider's key;
	// empty: ANTHROPIC_API_KEY for an anthropic upstream, else OPENAI_API_KEY.
	APIKeyEnv string
	// UpstreamDialect is the provider's wire format: chat (default),
	// responses or anthropic. Calls in another dialect are translated.
	UpstreamDialect string
	// Providers are the worker's named providers, which runs' roles pick
	// by name; the one above is named default. Their keys come from the
	// environment (rollout.ProviderKeyEnv).
	Providers []Provider
	// ClaudeModels reads model names as the Claude models they stand for,
	// for calls translated to an anthropic provider
	// (interception.Config.ClaudeModels).
	ClaudeModels map[string]string
	Mock         mock.Config
	// Upstream bounds how long the provider may take and how many calls it
	// gets at once; zero fields take the providers package's defaults.
	Upstream UpstreamLimits
	// BodyReadTimeout bounds how long a harness may take to send a request
	// body; 0 is interception.DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
	// Prices price the model calls; prices.Default() when nil.
	Prices prices.Table
	// MaxRollouts bounds the rollouts this worker runs at once.
	MaxRollouts int
	// Multiplex is how many rollouts share one interception server.
	Multiplex int
	// WorkDir is where harness workdirs are made; empty: the system temp dir.
	WorkDir string
	// Runtime runs harnesses; nil: local subprocesses. Packaged harnesses
	// (codex, claude-code) run on it too (see packagedRuntime).
	Runtime harness.Runtime
	// SkipUnsupported lets the local, netns and bwrap runtimes run a task
	// whose Dockerfile asks for what they cannot carry out (RUN lines,
	// earlier build stages), skipping those lines; without it such a task
	// fails its run.
	SkipUnsupported bool
	// HarnessCache is where packaged harnesses are installed; empty:
	// packaged.DefaultCacheDir.
	HarnessCache string
	// Interception is how harnesses reach the interception servers: through
	// its tunnel when Runtime is remote, at loopback otherwise.
	Interception Interception
	// DefaultHarness is the command of the built-in agent; empty: this
	// executable's hidden "agent" command.
	DefaultHarness []string
	Logger         *slog.Logger
	// MetricsAddr is where the worker serves Prometheus metrics at
	// /metrics (host:port; port 0 picks one, see Worker.MetricsAddr).
	// Empty: no metrics.
	MetricsAddr string
	// Namespace is the Temporal namespace of the worker's client, which
	// the SDK's metrics are tagged with; empty: "default".
	Namespace string
	// DrainTimeout is how long rollouts running when the worker stops may
	// go on before they are handed back to run on another worker; 0 hands
	// them back at once.
	DrainTimeout time.Duration
	// Store, when set, is the run store, already open (WaitForStore); the
	// worker closes it. Nil: NewWorker opens the one StoreURL or RunsDir
	// names.
	Store results.Store
}

// store is the run store cfg names.
func (cfg Config) store() StoreConfig {
	return StoreConfig{URL: cfg.StoreURL, RunsDir: cfg.RunsDir}
}

// StoreName names the run store for a log line, without a password.
func (cfg Config) StoreName() string { return cfg.store().String() }

// UpstreamLimits are the provider client's timeouts and its adaptive
// concurrency bounds (providers.Client).
type UpstreamLimits struct {
	HeaderTimeout, IdleTimeout     time.Duration
	MinConcurrency, MaxConcurrency int
}

// SDKTimeout is the request timeout a harness's SDK is given: the longest
// the interception server may take to begin an answer while it retries the
// provider (every attempt waiting the header timeout, each retry after at
// most the longest Retry-After it honours), so that the SDK does not give
// up first and send the call again on its own.
func (l UpstreamLimits) SDKTimeout() time.Duration {
	header := l.HeaderTimeout
	if header <= 0 {
		header = providers.DefaultResponseHeaderTimeout
	}
	n := time.Duration(providers.DefaultMaxAttempts)
	return n*header + (n-1)*providers.DefaultMaxRetryAfter
}

// apply sets the limits on c.
func (l UpstreamLimits) apply(c *providers.Client) {
	c.ResponseHeaderTimeout, c.StreamIdleTimeout = l.HeaderTimeout, l.IdleTimeout
	c.MinConcurrency, c.MaxConcurrency = l.MinConcurrency, l.MaxConcurrency
}

// Worker is a running evalflow worker: a worker on the shared task queue, one
// on this process's own host queue, and the interception pool they share.
type Worker struct {
	cfg     Config
	shared  worker.Worker
	host    worker.Worker
	pool    *interception.Pool
	cap     *activities.Capacity
	acts    *activities.Activities
	mock    *http.Server
	stop    chan struct{}
	sweeper sync.WaitGroup
	metrics *metricsEndpoint // nil without Config.MetricsAddr
	gateway *gatewayEndpoint // nil without Interception.GatewayAddr
	store   results.Store
	// UsingMock is true when no provider is configured and rollouts talk to
	// the offline mock model.
	UsingMock bool
}

// defaultMaxRollouts is how many rollouts a worker runs at once unless told.
const defaultMaxRollouts = 64

// withDefaults fills the zero fields of cfg with a worker's defaults: the
// shared task queue, defaultMaxRollouts, the key variable of the upstream's
// dialect, slog's logger, the interception's multiplex, the built-in agent
// and local subprocesses, with packaged harnesses run on whichever runtime.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.TaskQueue == "" {
		cfg.TaskQueue = DefaultTaskQueue
	}
	if cfg.MaxRollouts <= 0 {
		cfg.MaxRollouts = defaultMaxRollouts
	}
	if cfg.APIKeyEnv == "" {
		cfg.APIKeyEnv = "OPENAI_API_KEY"
		if cfg.UpstreamDialect == "anthropic" {
			cfg.APIKeyEnv = "ANTHROPIC_API_KEY"
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Multiplex <= 0 {
		cfg.Multiplex = cfg.Interception.multiplex()
	}
	if len(cfg.DefaultHarness) == 0 {
		command, lean, err := builtinAgent()
		if err != nil {
			return cfg, err
		}
		if !lean {
			cfg.Logger.Info("the built-in agent runs as this program; build cmd/evalflow-agent beside it (make build) or set "+AgentEnv+" for lighter rollouts", "program", command[0])
		}
		cfg.DefaultHarness = command
	}
	if cfg.Runtime == nil {
		cfg.Runtime = &local.Runtime{Dir: cfg.WorkDir}
	}
	if a, ok := cfg.Runtime.(*auto.Runtime); ok {
		cfg.Logger.Info("runtime auto: " + a.Choice())
	}
	cfg.Runtime = packagedRuntime(cfg.Runtime, cfg.HarnessCache, cfg.WorkDir)
	return cfg, nil
}

// NewWorker builds a worker on c. Call Start, then Stop.
func NewWorker(c client.Client, cfg Config) (_ *Worker, err error) {
	if cfg, err = cfg.withDefaults(); err != nil {
		return nil, err
	}
	for _, warning := range cfg.Interception.Warnings {
		cfg.Logger.Warn(warning)
	}
	store, err := cfg.openStore()
	if err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, stop: make(chan struct{}), store: store}
	defer func() {
		if err != nil {
			w.abandon()
		}
	}()
	c, m, err := w.instrument(c)
	if err != nil {
		return nil, err
	}
	tun, err := cfg.Interception.Tunnel(cfg.Runtime)
	if err != nil {
		return nil, err
	}
	upstream, named, err := w.providers()
	if err != nil {
		return nil, err
	}
	w.startPool(tun, upstream, m)
	w.acts = w.newActivities(upstream, named, m)
	w.shared = w.sharedWorker(c)
	w.host = w.hostWorker(c)
	return w, nil
}

// openStore is cfg.Store, or else the run store StoreURL or RunsDir names,
// opened.
func (cfg Config) openStore() (results.Store, error) {
	if cfg.Store != nil {
		return cfg.Store, nil
	}
	return OpenStore(context.Background(), cfg.store(), cfg.Logger)
}

// abandon closes what a NewWorker that failed had opened.
func (w *Worker) abandon() {
	if w.mock != nil {
		_ = w.mock.Close()
	}
	w.stopMetrics()
	_ = w.store.Close()
}

// instrument starts collecting metrics when the worker serves them: the
// workers are then built on the client it returns, which reports the SDK's
// metrics too. Without metrics it returns c and a nil *metrics.Metrics,
// which records nothing.
func (w *Worker) instrument(c client.Client) (client.Client, *metrics.Metrics, error) {
	if w.cfg.MetricsAddr == "" {
		return c, nil, nil
	}
	var err error
	if w.metrics, err = newMetricsEndpoint(c, w.cfg.Namespace, w.cfg.Logger); err != nil {
		return nil, nil, err
	}
	return w.metrics.client, w.metrics.m, nil
}

// providers are the worker's upstream, the provider rollouts and judges
// use by default, and every provider a run's roles may name, the default
// among them.
func (w *Worker) providers() (interception.Upstream, map[string]activities.Provider, error) {
	upstream, err := w.upstream()
	if err != nil {
		return nil, nil, err
	}
	named := map[string]activities.Provider{rollout.DefaultProvider: upstream}
	for _, p := range w.cfg.Providers {
		c, err := p.client(w.cfg.Upstream)
		if err != nil {
			return nil, nil, err
		}
		named[p.Name] = c
	}
	return upstream, named, nil
}

// startPool starts the interception pool the worker's rollouts share, with
// its tunnels' monitor and its gateway registrations' sweeper.
func (w *Worker) startPool(tun tunnel.Tunnel, upstream interception.Upstream, m *metrics.Metrics) {
	cfg := w.cfg
	w.cap = activities.NewCapacity(cfg.MaxRollouts)
	w.pool = interception.NewPool(interception.Config{
		Multiplex:       cfg.Multiplex,
		Tunnel:          tun,
		Upstream:        upstream,
		Logger:          cfg.Logger,
		GatewayToken:    cfg.Interception.GatewayToken,
		GatewayTTL:      cfg.Interception.GatewayTTL,
		GatewaySlots:    w.cap,
		BodyReadTimeout: cfg.BodyReadTimeout,
		Metrics:         m,
		Prices:          cfg.Prices,
		ClaudeModels:    cfg.ClaudeModels,
	})
	w.pool.StartMonitor(cfg.Interception.HealthInterval)
	w.pool.StartGatewaySweeper(0)
	m.TunnelsUp(w.pool.Tunnels)
}

// newActivities are the worker's activities, on its pool, runtime, store
// and providers.
func (w *Worker) newActivities(upstream interception.Upstream, named map[string]activities.Provider, m *metrics.Metrics) *activities.Activities {
	cfg := w.cfg
	return &activities.Activities{
		Pool:            w.pool,
		Runtime:         cfg.Runtime,
		Store:           w.store,
		Tasksets:        &activities.TasksetCache{},
		HostQueue:       hostQueue(cfg.TaskQueue),
		DefaultHarness:  cfg.DefaultHarness,
		Capacity:        w.cap,
		Judge:           upstream,
		Providers:       named,
		Prices:          cfg.Prices,
		WorkDir:         cfg.WorkDir,
		SkipUnsupported: cfg.SkipUnsupported,
		SDKTimeout:      cfg.Upstream.SDKTimeout(),
		Logger:          cfg.Logger,
		Metrics:         m,
		DrainTimeout:    cfg.DrainTimeout,
	}
}

// sharedWorker is the worker on the shared task queue: it runs the
// workflows, and the activities any worker may take (Acquire first).
func (w *Worker) sharedWorker(c client.Client) worker.Worker {
	shared := worker.New(c, w.cfg.TaskQueue, worker.Options{
		// Acquire blocks while this worker is full, so at most this many wait here.
		MaxConcurrentActivityExecutionSize: w.cfg.MaxRollouts,
		// More pollers than the SDK's 2 keep a poll waiting when a window of
		// rollouts schedules activities at once: schedule-to-start p99 fell
		// 2-5x in bench/ (BENCHMARKS.md, section 4).
		MaxConcurrentActivityTaskPollers: activityPollers,
		MaxConcurrentWorkflowTaskPollers: workflowPollers,
		// Activities end on their own within the drain timeout (handed
		// back); the margin lets them report it before the SDK cancels them.
		WorkerStopTimeout: w.cfg.DrainTimeout + stopMargin,
	})
	shared.RegisterWorkflowWithOptions(workflows.Eval, workflow.RegisterOptions{Name: workflows.EvalName})
	shared.RegisterWorkflowWithOptions(workflows.Sweep, workflow.RegisterOptions{Name: workflows.SweepName})
	shared.RegisterWorkflowWithOptions(workflows.Train, workflow.RegisterOptions{Name: workflows.TrainName})
	shared.RegisterWorkflowWithOptions(workflows.Epoch, workflow.RegisterOptions{Name: workflows.EpochName})
	shared.RegisterWorkflowWithOptions(workflows.Pull, workflow.RegisterOptions{Name: workflows.PullName})
	shared.RegisterActivity(w.acts)
	return shared
}

// hostWorker is the worker on this process's own host queue: it runs a
// rollout's steps on the worker that acquired its slot.
func (w *Worker) hostWorker(c client.Client) worker.Worker {
	host := worker.New(c, w.acts.HostQueue, worker.Options{
		MaxConcurrentActivityExecutionSize: 2*w.cfg.MaxRollouts + 8,
		MaxConcurrentActivityTaskPollers:   activityPollers,
		WorkerStopTimeout:                  w.cfg.DrainTimeout + stopMargin,
	})
	host.RegisterActivityWithOptions(w.acts.Expose, activity.RegisterOptions{Name: rollout.ActivityExpose})
	host.RegisterActivityWithOptions(w.acts.Run, activity.RegisterOptions{Name: rollout.ActivityRun})
	host.RegisterActivityWithOptions(w.acts.Verify, activity.RegisterOptions{Name: rollout.ActivityVerify})
	host.RegisterActivityWithOptions(w.acts.Release, activity.RegisterOptions{Name: rollout.ActivityRelease})
	return host
}

// upstream picks the configured provider, or starts the offline mock model.
func (w *Worker) upstream() (interception.Upstream, error) {
	if w.cfg.BaseURL != "" {
		up, err := providers.New(w.cfg.UpstreamDialect, w.cfg.BaseURL, os.Getenv(w.cfg.APIKeyEnv))
		if err != nil {
			return nil, fmt.Errorf("upstream: %w", err)
		}
		w.cfg.Upstream.apply(up)
		return up, nil
	}
	m, err := mock.New(w.cfg.Mock)
	if err != nil {
		return nil, fmt.Errorf("start mock model: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start mock model: %w", err)
	}
	w.mock = &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = w.mock.Serve(ln) }()
	w.UsingMock = true
	up, err := providers.New(w.cfg.UpstreamDialect, "http://"+ln.Addr().String()+"/v1", "")
	if err != nil {
		_ = w.mock.Close()
		return nil, fmt.Errorf("upstream: %w", err)
	}
	w.cfg.Upstream.apply(up)
	return up, nil
}

// Start starts serving metrics, when configured, and polling both task
// queues.
func (w *Worker) Start() error {
	if w.metrics != nil {
		if err := w.metrics.listen(w.cfg.MetricsAddr); err != nil {
			return err
		}
	}
	if w.cfg.Interception.GatewayAddr != "" {
		gw, err := listenGateway(w.cfg.Interception.GatewayAddr, w.pool)
		if err != nil {
			w.stopMetrics()
			return err
		}
		w.gateway = gw
		w.cfg.Logger.Info("rollout gateway listening", "addr", gw.ln.Addr().String())
	}
	if err := w.shared.Start(); err != nil {
		w.stopGateway()
		w.stopMetrics()
		return fmt.Errorf("start worker on %s: %w", w.cfg.TaskQueue, err)
	}
	if err := w.host.Start(); err != nil {
		w.shared.Stop()
		w.stopGateway()
		w.stopMetrics()
		return fmt.Errorf("start host worker: %w", err)
	}
	w.sweeper.Add(1)
	go w.sweep()
	return nil
}

// sweep frees slots acquired here whose rollout never came to run (its
// workflow retried elsewhere), so they do not hold capacity forever.
func (w *Worker) sweep() {
	defer w.sweeper.Done()
	t := time.NewTicker(30 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			for _, key := range activities.Sweep(w.acts, 5*time.Minute) {
				w.cfg.Logger.Warn("released a slot whose rollout never ran", "key", key)
			}
		}
	}
}

// stopMargin is how long past the drain timeout Stop waits for handed-back
// activities to report their failure to Temporal.
const stopMargin = 5 * time.Second

// StopTimeout bounds how long Stop takes with a drain timeout of drain:
// the drain, the margin for the handed-back rollouts to report, and the
// closing of servers and the store.
func StopTimeout(drain time.Duration) time.Duration { return drain + stopMargin + 10*time.Second }

// Stop stops polling both queues at once, lets running rollouts finish
// within Config.DrainTimeout and hands back the rest (each retried at once
// on another worker), then closes every interception server.
func (w *Worker) Stop() {
	close(w.stop)
	w.sweeper.Wait()
	var stopping sync.WaitGroup
	stopping.Go(w.shared.Stop)
	stopping.Go(w.host.Stop)
	stopping.Wait()
	// No activity runs now: what waits for a Verify goes.
	activities.CloseLeases(w.acts)
	w.stopGateway()
	if err := w.pool.Close(); err != nil {
		w.cfg.Logger.Warn("close interception pool", "error", err)
	}
	if w.mock != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := w.mock.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.cfg.Logger.Warn("stop mock model", "error", err)
		}
	}
	w.stopMetrics()
	if err := w.store.Close(); err != nil {
		w.cfg.Logger.Warn("close run store", "error", err)
	}
}

// HandBack cuts a Stop's drain short: the rollouts still running are
// handed back now (a second stop signal).
func (w *Worker) HandBack() { activities.HandBack(w.acts) }

// stopMetrics stops the metrics endpoint, if there is one.
func (w *Worker) stopMetrics() {
	if w.metrics != nil {
		w.metrics.close(w.cfg.Logger)
		w.metrics = nil
	}
}

// MetricsAddr is the address the worker serves /metrics at once started,
// or "" without metrics.
func (w *Worker) MetricsAddr() string {
	if w.metrics == nil || w.metrics.ln == nil {
		return ""
	}
	return w.metrics.ln.Addr().String()
}

func hostQueue(shared string) string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s/host/%s/%s", shared, host, hex.EncodeToString(b))
}

// Pollers per worker; see NewWorker.
const (
	activityPollers = 16
	workflowPollers = 8
)

// packagedRuntime wraps rt so that runs naming a packaged harness
// (packaged.Command) install and run it; other commands run on rt as they
// are. Packaged harnesses are installed on this host and configured in
// host directories, which only the local and netns runtimes see.
func packagedRuntime(rt harness.Runtime, cache, workDir string) harness.Runtime {
	if p, ok := rt.(*packaged.Runtime); ok {
		return p
	}
	p := &packaged.Runtime{Runtime: rt, Installer: &packaged.Installer{Dir: cache}, Dir: workDir}
	switch rt.(type) {
	case *local.Runtime, *local.Netns, *auto.Runtime, *container.Runtime:
		// In a container sandbox they run as their native programs,
		// mounted at their host paths.
	default:
		p.Unsupported = fmt.Sprintf("runs in the local or netns runtime only (its program and configuration are on this host), not in %T", rt)
	}
	return p
}
