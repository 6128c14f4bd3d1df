package wiring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/postgres"
)

// Bounds of the backoff between a starting worker's attempts to reach
// Temporal and its run store.
const (
	firstRetryDelay = 250 * time.Millisecond
	maxRetryDelay   = 10 * time.Second
	// attemptTimeout bounds one attempt, so that an address that drops
	// packets is tried again instead of waited on.
	attemptTimeout = 10 * time.Second
)

// ErrStopped is returned by the waits when their context was cancelled
// (a stop signal) before what they wait for answered.
var ErrStopped = errors.New("stopped while waiting")

// WaitForTemporal dials the Temporal frontend conn names until it answers,
// one log line per failed attempt (what failed, the next delay), with
// capped exponential backoff. It gives up when ctx ends: with ErrStopped
// when ctx was cancelled, else with an error naming the frontend that
// never answered.
// A connection whose TLS files are wrong is refused at once: waiting would
// not mend it.
func WaitForTemporal(ctx context.Context, conn Connection, logger *slog.Logger) (client.Client, error) {
	if _, err := conn.tlsConfig(); err != nil {
		return nil, err
	}
	var c client.Client
	what := "Temporal at " + conn.String()
	err := retry(ctx, logger, what, func(ctx context.Context) error {
		var err error
		c, err = DialConnection(ctx, conn, logger, attemptTimeout)
		return err
	})
	return c, err
}

// WaitForStore opens the run store s names, waiting for a PostgreSQL
// store's database to answer as WaitForTemporal waits for Temporal. The
// files store is opened at once.
func WaitForStore(ctx context.Context, s StoreConfig, logger *slog.Logger) (results.Store, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if s.URL != "" {
		err := retry(ctx, logger, "the run store "+s.String(), func(ctx context.Context) error {
			actx, cancel := context.WithTimeout(ctx, attemptTimeout)
			defer cancel()
			return postgres.Ping(actx, s.URL)
		})
		if err != nil {
			return nil, err
		}
	}
	return OpenStore(ctx, s, logger)
}

// retry calls try until it succeeds or ctx ends.
func retry(ctx context.Context, logger *slog.Logger, what string, try func(context.Context) error) error {
	delay := firstRetryDelay
	for attempt := 1; ; attempt++ {
		err := try(ctx)
		if err == nil {
			if attempt > 1 {
				logger.Info(what+" answered", "attempts", attempt)
			}
			return nil
		}
		if ctx.Err() == nil {
			logger.Warn("waiting for "+what, "attempt", attempt, "error", err.Error(), "next_attempt_in", delay.String())
			t := time.NewTimer(delay)
			select {
			case <-t.C:
				delay = min(2*delay, maxRetryDelay)
				continue
			case <-ctx.Done():
				t.Stop()
			}
		}
		if errors.Is(ctx.Err(), context.Canceled) {
			return fmt.Errorf("%w for %s", ErrStopped, what)
		}
		return fmt.Errorf("%s did not answer within the start timeout (--%s; %d attempts; check that it runs and this host reaches it, or wait longer): %w",
			what, FlagStartTimeout, attempt, err)
	}
}
