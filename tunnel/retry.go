package tunnel

import (
	"context"
	"time"
)

// Retry is how many times, and how patiently, a tunnel tries to come up
// before Expose fails. Temporal retries the Expose activity on top of this.
type Retry struct {
	// Attempts counts tries, the first included; <= 0 is 1.
	Attempts int
	// Initial is the wait after the first failure; it doubles up to Max.
	Initial time.Duration
	Max     time.Duration
}

// DefaultRetry is used by a zero Retry.
var DefaultRetry = Retry{Attempts: 3, Initial: 250 * time.Millisecond, Max: 5 * time.Second}

// create runs one creation attempt after another until one succeeds, each
// after a token from lim.
func (r Retry) create(ctx context.Context, lim Limiter, attempt func(context.Context) (Exposure, error)) (Exposure, error) {
	if r == (Retry{}) {
		r = DefaultRetry
	}
	wait := r.Initial
	var err error
	for i := range max(r.Attempts, 1) {
		if i > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, err
			case <-t.C:
			}
			wait = min(2*wait, max(r.Max, r.Initial))
		}
		if werr := limiterOr(lim).Wait(ctx); werr != nil {
			return nil, werr
		}
		var exp Exposure
		if exp, err = attempt(ctx); err == nil {
			return exp, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
	}
	return nil, err
}
