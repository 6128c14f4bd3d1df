// Package loadgen drives HTTP load at model endpoints for the benchmarks:
// one request at a time across several targets in turn (added latency),
// many clients closed-loop or paced open-loop (throughput), and SSE
// streams checked event by event (time to first token, per-event delay,
// lost and merged events). Every loop is bounded by a count or a deadline.
package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Target is one endpoint under test.
type Target struct {
	// Name labels the target in results.
	Name string
	// URL is the full URL of the route, e.g. http://127.0.0.1:1234/v1/chat/completions.
	URL string
	// Body is the request body sent on every call.
	Body []byte
	// Header returns the headers of one call; nil sends only Content-Type.
	// It is called per request so that credentials may rotate.
	Header func() http.Header
	// Done, when set, is told of every call's end (answered or failed),
	// with the headers Header gave it.
	Done func(http.Header)
	// Settle, when set, finishes the work the target deferred while it was
	// answering (the interception server parses its trace after the
	// caller has the answer). Load runs it after a window and counts its
	// time in the window, so a target's throughput includes what it put
	// off.
	Settle func()
}

// Client sends requests to targets.
type Client struct {
	HTTP *http.Client
}

var _ Doer = (*Client)(nil)

// NewClient returns a client keeping up to conns idle connections per host,
// so that a load of conns clients never reconnects.
func NewClient(conns int) *Client {
	return &Client{HTTP: &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}}
}

func (t Target) request(ctx context.Context) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(t.Body))
	if err != nil {
		return nil, fmt.Errorf("%s: new request: %w", t.Name, err)
	}
	if t.Header != nil {
		req.Header = t.Header()
	}
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

// Do sends one request and reads the whole answer, returning the time from
// sending to the last byte. A status other than 200 is an error.
func (c *Client) Do(ctx context.Context, t Target) (time.Duration, error) {
	req, err := t.request(ctx)
	if err != nil {
		return 0, err
	}
	if t.Done != nil {
		defer t.Done(req.Header)
	}
	start := time.Now()
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", t.Name, err)
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("%s: read answer: %w", t.Name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: status %d", t.Name, resp.StatusCode)
	}
	return d, nil
}

// maxTries bounds the calls Interleaved makes for one sample.
const maxTries = 3

// settleEvery is how many rounds Interleaved runs between settling the
// targets' deferred work.
const settleEvery = 16

// Interleaved sends n requests to every target, one request at a time: each
// round calls every target once, starting from a different target each
// round, so that all targets see the same conditions. It returns the
// latencies by target name after warm requests to each, and the calls that
// failed by target name: a failed call is tried again (at most maxTries
// times in all) so that one broken connection does not end a run, and is
// reported rather than hidden; a call failing every try ends the run.
// Every settleEvery rounds, and outside any timing, it runs the targets'
// Settle: a latency is what the caller waits for, and work a target put
// off until after its answers must not land on the next target's call.
func Interleaved(ctx context.Context, c Doer, targets []Target, n, warm int) (latencies map[string][]time.Duration, failed map[string]int, err error) {
	latencies = make(map[string][]time.Duration, len(targets))
	failed = make(map[string]int)
	for round := -warm; round < n; round++ {
		for j := range targets {
			t := targets[(j+max(round, 0))%len(targets)]
			var d time.Duration
			for try := 1; ; try++ {
				if d, err = c.Do(ctx, t); err == nil {
					break
				}
				failed[t.Name]++
				if try == maxTries || ctx.Err() != nil {
					return nil, failed, err
				}
			}
			if round >= 0 {
				latencies[t.Name] = append(latencies[t.Name], d)
			}
		}
		if (round+warm+1)%settleEvery == 0 {
			for _, t := range targets {
				if t.Settle != nil {
					t.Settle()
				}
			}
		}
	}
	return latencies, failed, nil
}
