package tunnel

import (
	"context"
	"fmt"

	"golang.org/x/time/rate"
)

// DefaultCreationsPerMinute bounds tunnel creations on one host.
const DefaultCreationsPerMinute = 512

// Limiter bounds how many tunnels are created: Wait blocks until one more
// creation is allowed or ctx is done. A worker shares a HostLimiter with
// the other workers of its host; a RateLimiter bounds one process.
type Limiter interface {
	Wait(ctx context.Context) error
}

var (
	_ Limiter = (*RateLimiter)(nil)
	_ Limiter = (*HostLimiter)(nil)
)

// RateLimiter bounds the tunnels one process creates per minute. It allows
// a burst of the whole minute's budget, then refills evenly.
type RateLimiter struct{ l *rate.Limiter }

// NewLimiter allows perMinute creations a minute in this process;
// perMinute <= 0 is unlimited.
func NewLimiter(perMinute int) *RateLimiter {
	l := &RateLimiter{l: rate.NewLimiter(rate.Inf, 0)}
	l.SetRate(perMinute)
	return l
}

// SetRate changes the budget; perMinute <= 0 is unlimited.
func (l *RateLimiter) SetRate(perMinute int) {
	if perMinute <= 0 {
		l.l.SetLimit(rate.Inf)
		return
	}
	l.l.SetBurst(perMinute)
	l.l.SetLimit(rate.Limit(float64(perMinute) / 60))
}

// Wait blocks until one creation is allowed or ctx is done.
func (l *RateLimiter) Wait(ctx context.Context) error {
	if err := l.l.Wait(ctx); err != nil {
		return fmt.Errorf("tunnel creation rate limit: %w", err)
	}
	return nil
}

// processCreations bounds the creations of tunnels given no Limiter: the
// default budget, in this process only. Workers pass a HostLimiter.
var processCreations = NewLimiter(DefaultCreationsPerMinute)

func limiterOr(l Limiter) Limiter {
	if l == nil {
		return processCreations
	}
	return l
}
