package providers

import (
	"context"
	"sync"
	"time"
)

// Concurrency defaults of a Client's adaptive limit.
const (
	DefaultMinConcurrency = 1
	DefaultMaxConcurrency = 4096 // the shared transport keeps as many connections
)

// limiter bounds how many calls a Client has in flight at its provider,
// and adapts the bound to the provider's rate limit the way TCP adapts its
// window (AIMD, as Inspect's adaptive connections and prime-rl do): a 429
// halves it, down to what was in flight (so that a limit far above the
// actual load still bites at once) and never below min; every limit
// successful calls raise it by one, up to max. A 429 carrying Retry-After
// also pauses every new call of the Client for that long. Every rollout of
// a worker shares its Client, so the whole run backs off together instead
// of each rollout hammering the provider alone.
//
// The limit starts at max: a provider that never says 429 sees no
// difference. One burst of 429s (the calls that were in flight together)
// lowers the limit once: a 429 of a call admitted before the last decrease
// does not lower it again.
type limiter struct {
	min, max int

	mu        sync.Mutex
	limit     int
	inFlight  int
	successes int // since the limit last changed
	// gen counts decreases; a call remembers the one it was admitted in.
	gen    uint64
	paused bool
	resume time.Time // end of the pause
	// pauses counts pauses, so that the timer of one a longer pause
	// replaced does nothing.
	pauses uint64
	timer  *time.Timer
	queue  []*waiter // admitted in order
}

// waiter is a call waiting for admission; ready is closed when it is
// admitted (the admission is counted in inFlight for it).
type waiter struct{ ready chan struct{} }

func newLimiter(minimum, maximum int) *limiter {
	if maximum <= 0 {
		maximum = DefaultMaxConcurrency
	}
	if minimum <= 0 {
		minimum = DefaultMinConcurrency
	}
	minimum = min(minimum, maximum)
	return &limiter{min: minimum, max: maximum, limit: maximum}
}

// ticket is one admitted call; done must be called once when it ends.
type ticket struct {
	l   *limiter
	gen uint64
}

// acquire waits for the call's turn: a free place under the limit, after
// any pause, behind the calls that waited first.
func (l *limiter) acquire(ctx context.Context) (ticket, error) {
	l.mu.Lock()
	if len(l.queue) == 0 && !l.paused && l.inFlight < l.limit {
		l.inFlight++
		t := ticket{l: l, gen: l.gen}
		l.mu.Unlock()
		return t, nil
	}
	w := &waiter{ready: make(chan struct{})}
	l.queue = append(l.queue, w)
	l.mu.Unlock()
	select {
	case <-w.ready:
		l.mu.Lock()
		defer l.mu.Unlock()
		return ticket{l: l, gen: l.gen}, nil
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		select {
		case <-w.ready: // admitted meanwhile: give the place on
			l.inFlight--
			l.dispatch()
		default:
			for i, q := range l.queue {
				if q == w {
					l.queue = append(l.queue[:i], l.queue[i+1:]...)
					break
				}
			}
		}
		return ticket{}, ctx.Err()
	}
}

// dispatch admits waiting calls while there is room; l.mu is held.
func (l *limiter) dispatch() {
	for len(l.queue) > 0 && !l.paused && l.inFlight < l.limit {
		w := l.queue[0]
		l.queue[0] = nil
		l.queue = l.queue[1:]
		l.inFlight++
		close(w.ready)
	}
}

// done ends an admitted call; ok says it was answered with success,
// which counts towards raising the limit.
func (t ticket) done(ok bool) {
	l := t.l
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inFlight--
	if ok && l.limit < l.max {
		l.successes++
		if l.successes >= l.limit {
			l.limit++
			l.successes = 0
		}
	}
	l.dispatch()
}

// throttled notes a 429 to an admitted call (which stays admitted until
// done): the limit is halved once per burst, and a pause of pause (when
// positive) holds every new call back.
func (t ticket) throttled(now time.Time, pause time.Duration) {
	l := t.l
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.gen == l.gen {
		l.limit = max(l.min, min(l.limit, l.inFlight)/2)
		l.successes = 0
		l.gen++
	}
	if pause <= 0 {
		return
	}
	until := now.Add(pause)
	if l.paused && !until.After(l.resume) {
		return
	}
	l.paused, l.resume = true, until
	l.pauses++
	if l.timer != nil {
		l.timer.Stop()
	}
	n := l.pauses
	l.timer = time.AfterFunc(pause, func() { l.unpause(n) })
}

// unpause ends pause number n, unless a longer one replaced it.
func (l *limiter) unpause(n uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n != l.pauses {
		return
	}
	l.paused, l.timer = false, nil
	l.dispatch()
}

// current is the limit and how many calls are in flight.
func (l *limiter) current() (limit, inFlight int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limit, l.inFlight
}
