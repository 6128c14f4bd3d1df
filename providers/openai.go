// Package providers holds the upstream clients evalflow relays model calls
// to, one per dialect, and the offline mock model (providers/mock).
package providers

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/evalflow/evalflow/dialects"
)

// Retry defaults.
const (
	DefaultMaxAttempts   = 4
	DefaultBaseDelay     = 250 * time.Millisecond
	DefaultMaxDelay      = 8 * time.Second
	DefaultMaxRetryAfter = 30 * time.Second
)

// sharedTransport is tuned for many concurrent rollouts calling a few hosts.
var sharedTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// Keep an idle connection for every rollout that may call at once: with
	// fewer, a burst above the limit closes connections on return and opens
	// new ones on the next call (512 concurrent callers in bench/).
	t.MaxIdleConns = 4096
	t.MaxIdleConnsPerHost = 1024
	t.IdleConnTimeout = 90 * time.Second
	t.ResponseHeaderTimeout = 0 // a model may think for minutes before the headers
	return t
}()

// OpenAI is the Client of an OpenAI-compatible chat completions upstream.
type OpenAI = Client

// Client is an upstream of one dialect: chat completions (NewOpenAI), OpenAI
// Responses (NewResponses) or Anthropic Messages (NewAnthropic). The zero
// values of its retry fields mean the defaults; a zero Client speaks chat.
type Client struct {
	// BaseURL includes /v1, e.g. https://api.openai.com/v1.
	BaseURL string
	// Client sends the requests; nil means a client on a shared tuned transport.
	Client *http.Client
	// MaxAttempts bounds attempts per call, the first included.
	MaxAttempts int
	// BaseDelay is the first backoff; it doubles per attempt up to MaxDelay.
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// MaxRetryAfter caps how long an upstream's Retry-After may make us wait.
	MaxRetryAfter time.Duration

	apiKey  string
	dialect string
}

// NewOpenAI returns an upstream at baseURL (with /v1) authenticated by apiKey;
// an empty apiKey sends no Authorization header.
func NewOpenAI(baseURL, apiKey string) *OpenAI {
	return newClient(baseURL, apiKey, dialects.NameChat)
}

func newClient(baseURL, apiKey, dialect string) *Client {
	return &Client{
		BaseURL: strings.TrimRight(baseURL, "/"),
		Client:  &http.Client{Transport: sharedTransport},
		apiKey:  apiKey,
		dialect: dialect,
	}
}

// RetryError is the connection error Do gives up on, with the attempts made.
type RetryError struct {
	Count int
	Err   error
}

// Error implements error.
func (e *RetryError) Error() string {
	return fmt.Sprintf("after %d attempts: %v", e.Count, e.Err)
}

// Unwrap returns the last attempt's error.
func (e *RetryError) Unwrap() error { return e.Err }

// Attempts reports how many attempts were made.
func (e *RetryError) Attempts() int { return e.Count }

// Do POSTs body to BaseURL+path (path after /v1, e.g. "/chat/completions").
// It retries 429, 500, 502, 503, 504 and connection errors with exponential
// backoff and jitter, honouring Retry-After, until MaxAttempts. When retries
// run out on a status, the last response is returned with its body intact so
// the caller can relay the upstream's own error; when they run out on a
// connection error, a *RetryError is returned. The int is how many attempts
// the response or the *RetryError took; a call ended by ctx, or whose
// request could not be built, reports 0.
func (o *Client) Do(ctx context.Context, path string, body []byte) (*http.Response, int, error) {
	return o.Relay(ctx, path, nil, dialects.Body{body})
}

// Relay is Do with the caller's request headers: the ones that describe the
// request (anthropic-version, anthropic-beta, openai-beta, …) are forwarded,
// auth is replaced by the upstream's own, and hop-by-hop, length and
// encoding headers are dropped. The body's pieces are sent as they are,
// not joined first.
func (o *Client) Relay(ctx context.Context, path string, h http.Header, body dialects.Body) (*http.Response, int, error) {
	name := o.Dialect()
	client := o.Client
	if client == nil {
		client = &http.Client{Transport: sharedTransport}
	}
	maxAttempts := o.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = DefaultMaxAttempts
	}
	url := strings.TrimRight(o.BaseURL, "/") + path
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, http.NoBody)
		if err != nil {
			return nil, 0, fmt.Errorf("%s request: %w", name, err)
		}
		if n := body.Len(); n > 0 {
			req.Body, req.ContentLength = io.NopCloser(body.Reader()), int64(n)
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(body.Reader()), nil }
		}
		forwardHeaders(req.Header, h)
		req.Header.Set("Content-Type", "application/json")
		o.auth(req.Header)
		resp, err := client.Do(req)
		var wait time.Duration
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return nil, 0, fmt.Errorf("%s %s: %w", name, path, ctx.Err())
			}
			if attempt >= maxAttempts {
				return nil, attempt, fmt.Errorf("%s %s: %w", name, path, &RetryError{Count: attempt, Err: err})
			}
			wait = o.backoff(attempt)
		case retryable(resp.StatusCode) && attempt < maxAttempts:
			wait = o.retryAfter(resp.Header, time.Now())
			if wait < 0 {
				wait = o.backoff(attempt)
			}
			// Drain a little so the connection can be reused.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close()
		default:
			return resp, attempt, nil
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, 0, fmt.Errorf("%s %s: %w", name, path, err)
		}
	}
}

func retryable(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// backoff is the wait after a failed attempt: exponential, capped, with the
// upper half jittered so concurrent rollouts do not retry in step.
func (o *Client) backoff(attempt int) time.Duration {
	base, ceiling := o.BaseDelay, o.MaxDelay
	if base <= 0 {
		base = DefaultBaseDelay
	}
	if ceiling <= 0 {
		ceiling = DefaultMaxDelay
	}
	d := base
	for i := 1; i < attempt && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	half := d / 2
	return half + rand.N(half+1)
}

// retryAfter reads retry-after-ms (OpenAI's) or Retry-After in seconds or as
// an HTTP date, capped at MaxRetryAfter. It returns -1 when there is none.
func (o *Client) retryAfter(h http.Header, now time.Time) time.Duration {
	ceiling := o.MaxRetryAfter
	if ceiling <= 0 {
		ceiling = DefaultMaxRetryAfter
	}
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return min(time.Duration(ms*float64(time.Millisecond)), ceiling)
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return -1
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 {
		return min(time.Duration(secs*float64(time.Second)), ceiling)
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), ceiling)
	}
	return -1
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
