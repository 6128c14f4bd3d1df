package wiring

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
	tlog "go.temporal.io/sdk/log"

	"github.com/evalflow/evalflow/internal/metrics"
)

// metricsEndpoint serves a worker's metrics, its own and the Temporal SDK's,
// at /metrics.
type metricsEndpoint struct {
	m      *metrics.Metrics
	scope  io.Closer // the SDK metrics' tally scope, flushed to the registry
	client client.Client
	ln     net.Listener
	srv    *http.Server
}

// newMetricsEndpoint makes the collectors and a client on c's connection
// whose SDK metrics (temporal_…) land on the same registry; workers built on
// that client report theirs there too.
func newMetricsEndpoint(c client.Client, namespace string, logger *slog.Logger) (*metricsEndpoint, error) {
	m := metrics.New()
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer:       m.Registry(),
		DefaultTimerType: tallyprom.HistogramTimerType,
		OnRegisterError: func(err error) {
			logger.Warn("register a temporal sdk metric", "error", err)
		},
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, time.Second)
	mc, err := client.NewClientFromExisting(c, client.Options{
		Namespace:      namespace,
		Logger:         tlog.NewStructuredLogger(logger),
		MetricsHandler: sdktally.NewMetricsHandler(sdktally.NewPrometheusNamingScope(scope)),
	})
	if err != nil {
		_ = closer.Close()
		return nil, fmt.Errorf("temporal client with metrics: %w", err)
	}
	return &metricsEndpoint{m: m, scope: closer, client: mc}, nil
}

// listen starts serving /metrics at addr.
func (e *metricsEndpoint) listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics endpoint (--%s): %w", FlagMetricsAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", e.m.Handler())
	e.ln = ln
	e.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = e.srv.Serve(ln) }()
	return nil
}

// close stops serving, flushes the SDK's metrics and closes the client.
func (e *metricsEndpoint) close(logger *slog.Logger) {
	if e.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("stop metrics endpoint", "error", err)
		}
	}
	if err := e.scope.Close(); err != nil {
		logger.Warn("close temporal sdk metrics", "error", err)
	}
	e.client.Close()
}
