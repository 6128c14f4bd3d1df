// Package metrics holds a worker's Prometheus collectors: rollouts, model
// calls through the interception servers, upstream retries and tunnels.
// They live on a registry of their own, never the global default, so that
// two workers in one process (tests) do not collide. A nil *Metrics records
// nothing: every package takes one as an optional field.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every evalflow metric; the Temporal SDK's own metrics
// are prefixed temporal_.
const Namespace = "evalflow"

// Metrics are the collectors of one worker.
type Metrics struct {
	reg *prometheus.Registry

	started  prometheus.Counter
	finished *prometheus.CounterVec
	inFlight prometheus.Gauge

	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	ttft     *prometheus.HistogramVec
	retries  *prometheus.CounterVec
	failures *prometheus.CounterVec
	cost     *prometheus.CounterVec
}

// Buckets of the upstream latency and time-to-first-token histograms, in
// seconds: model calls take from tens of milliseconds (a cached or mock
// answer) to minutes (a long generation).
var latencyBuckets = []float64{.025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// New returns collectors registered on a fresh registry, with the Go
// runtime's and the process's collectors beside them.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	f := factory{m.reg}
	m.started = f.counter(prometheus.CounterOpts{Name: "rollouts_started_total",
		Help: "Rollout attempts this worker started running (a stored rollout reused is not started)."})
	m.finished = f.counterVec(prometheus.CounterOpts{Name: "rollouts_finished_total",
		Help: "Rollout attempts this worker finished, by status (ok, error, or retry: an infrastructure error Temporal retries) and error kind."},
		"status", "error_kind")
	m.inFlight = f.gauge(prometheus.GaugeOpts{Name: "rollouts_in_flight",
		Help: "Rollouts running on this worker now."})
	m.requests = f.counterVec(prometheus.CounterOpts{Name: "interception_requests_total",
		Help: "Model calls served by the interception servers, by the caller's dialect, arm (relay or translate) and the HTTP status the caller got."},
		"dialect", "arm", "status")
	m.latency = f.histogramVec(prometheus.HistogramOpts{Name: "upstream_latency_seconds",
		Help: "Time from a model call's arrival to the end of its answer, retries included, by the caller's dialect.", Buckets: latencyBuckets},
		"dialect")
	m.ttft = f.histogramVec(prometheus.HistogramOpts{Name: "upstream_ttft_seconds",
		Help: "Time from a model call's arrival to the first byte of the provider's answer, by the caller's dialect.", Buckets: latencyBuckets},
		"dialect")
	m.retries = f.counterVec(prometheus.CounterOpts{Name: "upstream_retries_total",
		Help: "Attempts at the provider beyond the first of each model call, by the caller's dialect."},
		"dialect")
	m.failures = f.counterVec(prometheus.CounterOpts{Name: "upstream_failures_total",
		Help: "Model calls the provider failed after every attempt, by how it failed."},
		"kind")
	m.cost = f.counterVec(prometheus.CounterOpts{Name: "model_cost_usd_total",
		Help: "USD the model calls of the rollouts this worker stored cost at its prices (--prices), by the model that answered; calls of a model without a price count nothing."},
		"model")
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is where the collectors are registered; the Temporal SDK's
// metrics are reported on it too.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry's metrics in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// TunnelsUp reports up() as the number of tunnels up, read at each scrape.
func (m *Metrics) TunnelsUp(up func() int) {
	if m == nil {
		return
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: "tunnels_up",
		Help: "Tunnels this worker's interception servers hold open."}, func() float64 { return float64(up()) }))
}

// RolloutStarted counts a rollout attempt that starts running here. Call
// RolloutFinished when it ends.
func (m *Metrics) RolloutStarted() {
	if m == nil {
		return
	}
	m.started.Inc()
	m.inFlight.Inc()
}

// RolloutFinished counts a rollout attempt's end: status ok or error with
// the rollout's error kind, or retry with the infrastructure error's type.
func (m *Metrics) RolloutFinished(status, errorKind string) {
	if m == nil {
		return
	}
	m.inFlight.Dec()
	m.finished.WithLabelValues(status, errorKind).Inc()
}

// Call is a model call an interception server served.
type Call struct {
	// Dialect is the caller's: chat, responses or anthropic.
	Dialect string
	// Arm is relay (the provider speaks the caller's dialect) or translate.
	Arm string
	// Status is the HTTP status the caller got.
	Status int
	// Latency is the whole call's; TTFT the time to the provider's first
	// byte, 0 when none came.
	Latency, TTFT time.Duration
	// Attempts is how many attempts the provider got.
	Attempts int
	// UpstreamFailure is how the provider failed the call, empty if it did not.
	UpstreamFailure string
}

// Cost adds what a stored rollout's calls of model cost, in USD.
func (m *Metrics) Cost(model string, usd float64) {
	if m == nil || usd <= 0 {
		return
	}
	m.cost.WithLabelValues(model).Add(usd)
}

// Called counts a model call.
func (m *Metrics) Called(c Call) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(c.Dialect, c.Arm, strconv.Itoa(c.Status)).Inc()
	m.latency.WithLabelValues(c.Dialect).Observe(c.Latency.Seconds())
	if c.TTFT > 0 {
		m.ttft.WithLabelValues(c.Dialect).Observe(c.TTFT.Seconds())
	}
	if c.Attempts > 1 {
		m.retries.WithLabelValues(c.Dialect).Add(float64(c.Attempts - 1))
	}
	if c.UpstreamFailure != "" {
		m.failures.WithLabelValues(c.UpstreamFailure).Inc()
	}
}

// factory registers collectors in Namespace on a registry.
type factory struct{ reg prometheus.Registerer }

func (f factory) counter(o prometheus.CounterOpts) prometheus.Counter {
	o.Namespace = Namespace
	return register(f, prometheus.NewCounter(o))
}

func (f factory) counterVec(o prometheus.CounterOpts, labels ...string) *prometheus.CounterVec {
	o.Namespace = Namespace
	return register(f, prometheus.NewCounterVec(o, labels))
}

func (f factory) gauge(o prometheus.GaugeOpts) prometheus.Gauge {
	o.Namespace = Namespace
	return register(f, prometheus.NewGauge(o))
}

func (f factory) histogramVec(o prometheus.HistogramOpts, labels ...string) *prometheus.HistogramVec {
	o.Namespace = Namespace
	return register(f, prometheus.NewHistogramVec(o, labels))
}

// register registers c on f's registry and returns it.
func register[C prometheus.Collector](f factory, c C) C {
	f.reg.MustRegister(c)
	return c
}
