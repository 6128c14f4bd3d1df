package providers

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A burst of 429s to calls in flight together halves the limit once, down
// to half of what was in flight; successes raise it by one per limit.
func TestLimiterAIMD(t *testing.T) {
	l := newLimiter(2, 64)
	ctx := context.Background()
	limit, _ := l.current()
	require.Equal(t, 64, limit, "the limit starts at its maximum")

	var burst []ticket
	for range 10 {
		tk, err := l.acquire(ctx)
		require.NoError(t, err)
		burst = append(burst, tk)
	}
	for _, tk := range burst {
		tk.throttled(time.Now(), 0)
		tk.done(false)
	}
	limit, inFlight := l.current()
	assert.Equal(t, 5, limit, "halved once, from the 10 in flight")
	assert.Zero(t, inFlight)

	tk, err := l.acquire(ctx)
	require.NoError(t, err)
	tk.throttled(time.Now(), 0)
	tk.done(false)
	limit, _ = l.current()
	assert.Equal(t, 2, limit, "a later 429 halves again, never below the minimum")

	for range 2 {
		tk, err := l.acquire(ctx)
		require.NoError(t, err)
		tk.done(true)
	}
	limit, _ = l.current()
	assert.Equal(t, 3, limit, "limit successes raise it by one")
}

// Calls beyond the limit wait, in order, and a call that gives up waiting
// leaves the queue.
func TestLimiterQueues(t *testing.T) {
	l := newLimiter(1, 1)
	first, err := l.acquire(context.Background())
	require.NoError(t, err)

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = l.acquire(gone)
	require.ErrorIs(t, err, context.Canceled, "no room: the call waits until its context ends")

	admitted := make(chan ticket)
	go func() {
		tk, err := l.acquire(context.Background())
		assert.NoError(t, err)
		admitted <- tk
	}()
	first.done(true)
	second := <-admitted
	_, inFlight := l.current()
	assert.Equal(t, 1, inFlight)
	second.done(true)
	_, inFlight = l.current()
	assert.Zero(t, inFlight)
}

// A 429 with Retry-After holds every new call back until it has passed.
func TestLimiterPausesEveryone(t *testing.T) {
	l := newLimiter(1, 8)
	tk, err := l.acquire(context.Background())
	require.NoError(t, err)
	tk.throttled(time.Now(), time.Hour)
	tk.done(false)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = l.acquire(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "room under the limit, but paused")

	l.mu.Lock()
	n := l.pauses
	l.mu.Unlock()
	l.unpause(n) // the hour has passed
	tk, err = l.acquire(context.Background())
	require.NoError(t, err)
	tk.done(true)
}

// The pause of a 429's Retry-After applies to the other callers of the
// Client too: none of their calls reaches the provider before it ends.
func TestClientPausesEveryCallerOnRetryAfter(t *testing.T) {
	const pause = 50 * time.Millisecond
	var mu sync.Mutex
	var throttledAt time.Time
	var arrivals []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		mu.Lock()
		defer mu.Unlock()
		if throttledAt.IsZero() {
			throttledAt = time.Now()
			w.Header().Set("Retry-After-Ms", "50")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"error":{"message":"slow down"}}`)
			return
		}
		arrivals = append(arrivals, time.Now())
		_, _ = io.WriteString(w, completion)
	}))
	defer srv.Close()
	c := faultClient(srv)

	resp, _, err := c.RelayOnce(context.Background(), "/chat/completions", nil, bodyOf(`{}`))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			resp, _, err := c.Relay(context.Background(), "/chat/completions", nil, bodyOf(`{}`))
			if assert.NoError(t, err) {
				_ = resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
			}
		})
	}
	wg.Wait()
	require.Len(t, arrivals, 4)
	for _, at := range arrivals {
		assert.GreaterOrEqual(t, at.Sub(throttledAt), pause, "a call reached the provider during the pause")
	}
}

// N callers against a provider that answers 429 to any call beyond K in
// flight: the shared limit comes down to what the provider takes, so the
// 429s stay few and every call succeeds; once the provider takes more, the
// limit climbs back to its maximum.
func TestClientBacksOffTogether(t *testing.T) {
	const (
		callers  = 16
		calls    = 8 // per caller
		capacity = 4 // K: calls the provider takes at once
	)
	var inFlight, throttled, served atomic.Int32
	var unlimited atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		w.Header().Set("Content-Type", "application/json")
		if n > capacity && !unlimited.Load() {
			throttled.Add(1)
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"error":{"message":"rate limited"}}`)
			return
		}
		// The provider's service time: what makes calls overlap.
		time.Sleep(2 * time.Millisecond)
		served.Add(1)
		_, _ = io.WriteString(w, completion)
	}))
	defer srv.Close()
	c := faultClient(srv)
	c.MaxConcurrency = callers
	c.MaxAttempts = 100 // a call is not to fail for want of attempts

	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range calls {
				resp, _, err := c.Relay(context.Background(), "/chat/completions", nil, bodyOf(`{}`))
				if assert.NoError(t, err) {
					_ = resp.Body.Close()
					assert.Equal(t, http.StatusOK, resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(callers*calls), served.Load(), "every call succeeded")
	// Each burst of 429s lowers the limit once, to half of what was in
	// flight; it takes limit successes per step to climb back above K.
	// Without the shared limit every waiting caller retries on its own,
	// and 429s outnumber the successes many times over.
	t.Logf("%d callers x %d calls, provider takes %d at once: %d 429s", callers, calls, capacity, throttled.Load())
	assert.LessOrEqual(t, throttled.Load(), int32(callers+callers*calls/4), "429s")

	unlimited.Store(true)
	limit, _ := c.ConcurrencyLimit()
	require.Less(t, limit, callers, "the limit came down")
	for limit < callers {
		// limit successes raise it by one: sequential calls, exactly.
		for range limit {
			resp, _, err := c.Relay(context.Background(), "/chat/completions", nil, bodyOf(`{}`))
			require.NoError(t, err)
			_ = resp.Body.Close()
		}
		next, _ := c.ConcurrencyLimit()
		require.Equal(t, limit+1, next)
		limit = next
	}
}
