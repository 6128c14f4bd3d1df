package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// retry runs op until it succeeds, fails for a reason other than the
// database being unreachable, the call's context ends, or Options.RetryFor
// passes. A database that restarts or fails over makes calls wait, with
// exponential backoff, rather than fail: a transaction cut short rolled
// back, and every write is idempotent, so running it again is safe.
func (s *Store) retry(ctx context.Context, what string, op func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var (
		start   = time.Now()
		wait    = 50 * time.Millisecond
		tries   int
		warned  bool
		lastErr error
	)
	for {
		err := op(ctx)
		if err == nil {
			if warned {
				s.opts.Logger.Info("run store reachable again", "store", s.where, "waited", time.Since(start).Round(time.Millisecond))
			}
			return nil
		}
		tries++
		if errors.Is(err, ErrSchemaTooNew) {
			return err // our own words, and no connection detail
		}
		if !transient(err) || ctx.Err() != nil {
			return fmt.Errorf("run store: %s: %w", what, redactErr(err, s.secret))
		}
		lastErr = err
		if time.Since(start) > s.opts.RetryFor {
			return fmt.Errorf("run store: %s: unreachable for %v (%d tries): %w", what, s.opts.RetryFor, tries, redactErr(lastErr, s.secret))
		}
		if !warned {
			warned = true
			s.opts.Logger.Warn("run store unreachable; retrying", "store", s.where, "doing", what, "error", redactErr(err, s.secret).Error())
		}
		// Full jitter keeps many workers from reconnecting in step.
		d := wait/2 + rand.N(wait/2+1)
		select {
		case <-ctx.Done():
			return fmt.Errorf("run store: %s: %w (last error: %v)", what, ctx.Err(), redactErr(lastErr, s.secret))
		case <-time.After(d):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// transient reports whether err says the database could not be reached or
// dropped the connection (a restart, a failover, a network cut), rather than
// refusing the statement.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"): // connection exception
			return true
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // shutdown, crash, starting
			return true
		case pgErr.Code == "40001", pgErr.Code == "40P01": // serialization failure, deadlock
			return true
		}
		return false
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connErr), errors.As(err, &netErr), pgconn.SafeToRetry(err):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "unexpected EOF") ||
		strings.Contains(msg, "connection reset")
}

// redacted is an error whose text never holds the database password.
type redacted struct {
	err    error
	secret string
}

func (r redacted) Error() string { return strings.ReplaceAll(r.err.Error(), r.secret, "xxxxx") }
func (r redacted) Unwrap() error { return r.err }

func redactErr(err error, secret string) error {
	if err == nil || secret == "" {
		return err
	}
	return redacted{err: err, secret: secret}
}
