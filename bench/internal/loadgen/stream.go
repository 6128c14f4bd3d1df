package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/evalflow/evalflow/bench/internal/upstream"
)

// StreamResult is one SSE stream as the client saw it. Content events carry
// the mock's marker (upstream.Marker): its sequence number and send time.
type StreamResult struct {
	// TTFT is from sending the request to reading the first content event.
	TTFT time.Duration
	// Delays are, per content event, from the mock writing it to the client
	// reading it.
	Delays []time.Duration
	// Gaps are, per content event after the first, the time since the
	// client read the one before it.
	Gaps []time.Duration
	// Events counts the content events read.
	Events int
	// Lost counts content events never read or read out of order.
	Lost int
	// Merged counts content events that arrived in the same read as the
	// content event before them although the mock sent them apart.
	Merged int
}

// Stream sends one streaming request and reads the stream to its end,
// expecting events content events.
func (c *Client) Stream(ctx context.Context, t Target, events int) (StreamResult, error) {
	req, err := t.request(ctx)
	if err != nil {
		return StreamResult{}, err
	}
	if t.Done != nil {
		defer t.Done(req.Header)
	}
	start := time.Now()
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return StreamResult{}, fmt.Errorf("%s: %w", t.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return StreamResult{}, fmt.Errorf("%s: status %d", t.Name, resp.StatusCode)
	}
	res := StreamResult{Delays: make([]time.Duration, 0, events)}
	buf := make([]byte, 0, 8<<10)
	chunk := make([]byte, 8<<10)
	want := 0
	var last time.Time
	for {
		n, rerr := resp.Body.Read(chunk)
		now := time.Now()
		buf = append(buf, chunk[:n]...)
		inRead := 0 // content events completed by this read
		for {
			i := bytes.Index(buf, []byte("\n\n"))
			if i < 0 {
				break
			}
			ev := buf[:i]
			if seq, sent, ok := upstream.Marker(ev); ok {
				if res.Events == 0 {
					res.TTFT = now.Sub(start)
				} else {
					res.Gaps = append(res.Gaps, now.Sub(last))
				}
				last = now
				res.Events++
				inRead++
				if inRead > 1 {
					res.Merged++
				}
				if seq != want {
					res.Lost += max(seq-want, 1)
				}
				want = seq + 1
				res.Delays = append(res.Delays, now.Sub(sent))
			}
			buf = buf[i+2:]
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				break
			}
			return res, fmt.Errorf("%s: read stream: %w", t.Name, rerr)
		}
	}
	res.Lost += max(events-want, 0)
	return res, nil
}

// StreamsResult sums many concurrent streams.
type StreamsResult struct {
	Streams   int     `json:"streams"`
	Completed int     `json:"completed"`
	Errors    int     `json:"errors"`
	Lost      int     `json:"lost_events"`
	Merged    int     `json:"merged_events"`
	TTFT      Summary `json:"ttft"`
	Delay     Summary `json:"event_delay"`
	// FirstError is the first error seen, for the report.
	FirstError string `json:"first_error,omitempty"`
}

// Streams runs n streams at once, their starts spread evenly over ramp, and
// calls during (when not nil) once every stream has read its first event or
// ended, while the others are still open.
func (c *Client) Streams(ctx context.Context, t Target, n, events int, ramp time.Duration, during func()) StreamsResult {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		out     = StreamsResult{Streams: n}
		ttft    []time.Duration
		delays  []time.Duration
		started sync.WaitGroup
	)
	started.Add(n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			once := sync.OnceFunc(started.Done)
			defer once()
			if ramp > 0 {
				time.Sleep(ramp * time.Duration(i) / time.Duration(n)) // spreading connection set-up
			}
			r, err := c.streamNotify(ctx, t, events, once)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				out.Errors++
				if out.FirstError == "" {
					out.FirstError = err.Error()
				}
				return
			}
			out.Completed++
			out.Lost += r.Lost
			out.Merged += r.Merged
			ttft = append(ttft, r.TTFT)
			delays = append(delays, r.Delays...)
		}()
	}
	if during != nil {
		started.Wait()
		during()
	}
	wg.Wait()
	out.TTFT, out.Delay = Summarize(ttft), Summarize(delays)
	return out
}

// streamNotify is Stream calling first after the first content event.
func (c *Client) streamNotify(ctx context.Context, t Target, events int, first func()) (StreamResult, error) {
	rd := &notifyReader{first: first}
	cc := &Client{HTTP: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := c.HTTP.Transport.RoundTrip(r)
		if err == nil {
			rd.r = resp.Body
			resp.Body = rd
		}
		return resp, err
	})}}
	return cc.Stream(ctx, t, events)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// notifyReader calls first once the body holds a marker.
type notifyReader struct {
	r     io.ReadCloser
	first func()
	seen  bool
}

func (n *notifyReader) Read(p []byte) (int, error) {
	k, err := n.r.Read(p)
	if !n.seen && bytes.Contains(p[:k], []byte("@@")) {
		n.seen = true
		n.first()
	}
	return k, err
}

func (n *notifyReader) Close() error { return n.r.Close() }
