package tunnel

import (
	"context"
	"fmt"

	"golang.org/x/time/rate"
)

// DefaultCreationsPerMinute bounds tunnel creations on one host.
const DefaultCreationsPerMinute = 512

// Limiter bounds how many tunnels are created per minute. It allows a burst
// of the whole minute's budget, then refills evenly.
type Limiter struct{ l *rate.Limiter }

// NewLimiter allows perMinute creations a minute; perMinute <= 0 is unlimited.
func NewLimiter(perMinute int) *Limiter {
	l := &Limiter{l: rate.NewLimiter(rate.Inf, 0)}
	l.SetRate(perMinute)
	return l
}

// SetRate changes the budget; perMinute <= 0 is unlimited.
func (l *Limiter) SetRate(perMinute int) {
	if perMinute <= 0 {
		l.l.SetLimit(rate.Inf)
		return
	}
	l.l.SetBurst(perMinute)
	l.l.SetLimit(rate.Limit(float64(perMinute) / 60))
}

// Wait blocks until one creation is allowed or ctx is done.
func (l *Limiter) Wait(ctx context.Context) error {
	if err := l.l.Wait(ctx); err != nil {
		return fmt.Errorf("tunnel creation rate limit: %w", err)
	}
	return nil
}

// Creations is the host-wide limiter every tunnel uses unless given its own.
var Creations = NewLimiter(DefaultCreationsPerMinute)

func limiterOr(l *Limiter) *Limiter {
	if l == nil {
		return Creations
	}
	return l
}
