package loadgen

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// LoadResult is what a load of concurrent clients achieved.
type LoadResult struct {
	Clients  int     `json:"clients"`
	Rate     float64 `json:"offered_rps,omitempty"`
	Requests int     `json:"requests"`
	Errors   int     `json:"errors"`
	// FirstError is what the first failed request said.
	FirstError string  `json:"first_error,omitempty"`
	RPS        float64 `json:"rps"`
	Latency    Summary `json:"latency"`
}

// Load runs clients concurrent clients against t for d. With rate 0 each
// client sends its next request as soon as the last one is answered (closed
// loop). With rate > 0 requests are due at rate per second in total (open
// loop) and a request's latency counts from when it was due, so a server
// that falls behind shows it in the tail instead of slowing the clients.
// The window ends when every client is done and t.Settle has run.
func Load(ctx context.Context, c Doer, t Target, clients int, rate float64, d time.Duration) LoadResult {
	var (
		next     atomic.Int64
		errs     atomic.Int64
		firstErr atomic.Pointer[string]
		mu       sync.Mutex
		lat      []time.Duration
		wg       sync.WaitGroup
		start    = time.Now()
		end      = start.Add(d)
		period   time.Duration
	)
	if rate > 0 {
		period = time.Duration(float64(time.Second) / rate)
	}
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, 1024)
			for ctx.Err() == nil {
				began := time.Now()
				if period > 0 {
					due := start.Add(time.Duration(next.Add(1)-1) * period)
					if !due.Before(end) {
						break
					}
					if wait := time.Until(due); wait > 0 {
						time.Sleep(wait) // pacing an open-loop load, not synchronization
						began = time.Now()
					} else {
						began = due
					}
				} else if !began.Before(end) {
					break
				}
				if _, err := c.Do(ctx, t); err != nil {
					errs.Add(1)
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
					continue
				}
				local = append(local, time.Since(began))
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Settle != nil {
		t.Settle()
	}
	elapsed := time.Since(start)
	res := LoadResult{
		Clients: clients, Rate: rate, Requests: len(lat), Errors: int(errs.Load()),
		RPS: float64(len(lat)) / elapsed.Seconds(), Latency: Summarize(lat),
	}
	if e := firstErr.Load(); e != nil {
		res.FirstError = *e
	}
	return res
}

// Doer sends one request to a target; *Client is one.
type Doer interface {
	Do(ctx context.Context, t Target) (time.Duration, error)
}
