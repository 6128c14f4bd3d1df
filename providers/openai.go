// Package providers holds the upstream clients evalflow relays model calls
// to, one per dialect, and the offline mock model (providers/mock).
package providers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
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
	t.ResponseHeaderTimeout = 0 // per call: Client.ResponseHeaderTimeout
	return t
}()

// OpenAI is the Client of an OpenAI-compatible chat completions upstream.
type OpenAI = Client

// Client is an upstream of one dialect: chat completions (NewOpenAI), OpenAI
// Responses (NewResponses) or Anthropic Messages (NewAnthropic). The zero
// values of its retry, timeout and concurrency fields mean the defaults; a
// zero Client speaks chat. Set the fields before the first call. A worker
// has one Client, shared by all its interception servers: its concurrency
// limit (see limiter) is the whole worker's.
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
	// ResponseHeaderTimeout bounds the wait for an answer's headers, per
	// attempt (DefaultResponseHeaderTimeout): a call that does not stream
	// gets its headers only once the model has finished.
	ResponseHeaderTimeout time.Duration
	// StreamIdleTimeout bounds the wait for the next bytes of an answer's
	// body, between SSE events or reads of a JSON body
	// (DefaultStreamIdleTimeout).
	StreamIdleTimeout time.Duration
	// MinConcurrency and MaxConcurrency bound the adaptive limit on calls
	// in flight (DefaultMinConcurrency, DefaultMaxConcurrency). The limit
	// starts at MaxConcurrency.
	MinConcurrency int
	MaxConcurrency int

	apiKey  string
	dialect string

	limiterOnce sync.Once
	lim         *limiter
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

// RetryError is the failure Relay gives up on, with the attempts made; Err
// is the last attempt's *FailureError.
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
// See Relay for the retries; an attempt whose answer is no event stream
// has its body read whole before Do returns.
func (o *Client) Do(ctx context.Context, path string, body []byte) (*http.Response, int, error) {
	return o.Relay(ctx, path, nil, dialects.Body{body})
}

// Relay POSTs body to BaseURL+path with the caller's request headers h:
// the ones that describe the request (anthropic-version, anthropic-beta,
// openai-beta, …) are forwarded, auth is replaced by the upstream's own,
// and hop-by-hop, length and encoding headers are dropped. The body's
// pieces are sent as they are, not joined first.
//
// An attempt fails on a 429, 500, 502, 503, 504 or 529, on a connection
// that cannot be made or breaks, on a timeout (ResponseHeaderTimeout,
// StreamIdleTimeout), on a 2xx answer that is no JSON object, and on an
// event stream that ends before its first event; every failure is retried
// with exponential backoff and jitter, honouring Retry-After, until
// MaxAttempts. To that end an answer that is no event stream is read
// whole, and a 2xx event stream up to the end of its first event, before
// Relay returns: nothing has reached the caller when an attempt is
// retried. When retries run out on a status, the last response is
// returned with its body intact so the caller can relay the upstream's
// own error; when they run out otherwise, a *RetryError wrapping the last
// *FailureError. The rest of a stream's body returns a *FailureError when
// the connection breaks or idles too long. The int is how many attempts
// the response or the *RetryError took; a call ended by ctx, or whose
// request could not be built, reports 0.
//
// Every attempt waits for a place under the Client's concurrency limit.
func (o *Client) Relay(ctx context.Context, path string, h http.Header, body dialects.Body) (*http.Response, int, error) {
	return o.relay(ctx, path, h, body, o.maxAttempts())
}

// RelayOnce is Relay with a single attempt: for a caller that retries on
// its own, so that its retries and the Client's do not multiply.
func (o *Client) RelayOnce(ctx context.Context, path string, h http.Header, body dialects.Body) (*http.Response, int, error) {
	return o.relay(ctx, path, h, body, 1)
}

// ConcurrencyLimit is how many calls the Client lets be in flight at its
// provider now, and how many are.
func (o *Client) ConcurrencyLimit() (limit, inFlight int) {
	return o.limiter().current()
}

func (o *Client) maxAttempts() int {
	if o.MaxAttempts <= 0 {
		return DefaultMaxAttempts
	}
	return o.MaxAttempts
}

func (o *Client) limiter() *limiter {
	o.limiterOnce.Do(func() { o.lim = newLimiter(o.MinConcurrency, o.MaxConcurrency) })
	return o.lim
}

// RelayRoot is Relay (RelayOnce when once) to a route at the root of
// BaseURL's server, outside its /v1: vLLM serves /tokenize there.
func (o *Client) RelayRoot(ctx context.Context, path string, h http.Header, body dialects.Body, once bool) (*http.Response, int, error) {
	attempts := o.maxAttempts()
	if once {
		attempts = 1
	}
	root := strings.TrimSuffix(strings.TrimRight(o.BaseURL, "/"), "/v1")
	return o.relayURL(ctx, root+path, path, h, body, attempts)
}

func (o *Client) relay(ctx context.Context, path string, h http.Header, body dialects.Body, maxAttempts int) (*http.Response, int, error) {
	return o.relayURL(ctx, strings.TrimRight(o.BaseURL, "/")+path, path, h, body, maxAttempts)
}

// relayURL makes the attempts at a call to url, whose route path names it
// in errors.
func (o *Client) relayURL(ctx context.Context, url, path string, h http.Header, body dialects.Body, maxAttempts int) (*http.Response, int, error) {
	name := o.Dialect()
	for attempt := 1; ; attempt++ {
		resp, err := o.attempt(ctx, url, h, body)
		var wait time.Duration
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return nil, 0, fmt.Errorf("%s %s: %w", name, path, ctx.Err())
			}
			var f *FailureError
			if !errors.As(err, &f) {
				return nil, 0, fmt.Errorf("%s request: %w", name, err)
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
			_ = resp.Body.Close()
		default:
			return resp, attempt, nil
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, 0, fmt.Errorf("%s %s: %w", name, path, err)
		}
	}
}

// attempt makes one attempt at a call, under the concurrency limit and
// the watchdog's timeouts. Its error is a *FailureError, the context's,
// or one building the request. A 2xx event stream comes back after its
// first event, holding its place under the limit until it is closed;
// any other answer comes back read whole.
func (o *Client) attempt(ctx context.Context, url string, h http.Header, body dialects.Body) (*http.Response, error) {
	t, err := o.limiter().acquire(ctx)
	if err != nil {
		return nil, err
	}
	w := newWatchdog(ctx, or(o.ResponseHeaderTimeout, DefaultResponseHeaderTimeout), or(o.StreamIdleTimeout, DefaultStreamIdleTimeout))
	fail := func(err error) (*http.Response, error) {
		w.stop()
		t.done(false)
		return nil, err
	}
	req, err := http.NewRequestWithContext(w.ctx, http.MethodPost, url, http.NoBody)
	if err != nil {
		return fail(err)
	}
	if n := body.Len(); n > 0 {
		req.Body, req.ContentLength = io.NopCloser(body.Reader()), int64(n)
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(body.Reader()), nil }
	}
	forwardHeaders(req.Header, h)
	req.Header.Set("Content-Type", "application/json")
	o.auth(req.Header)
	client := o.Client
	if client == nil {
		client = &http.Client{Transport: sharedTransport}
	}
	resp, err := client.Do(req)
	if err != nil {
		return fail(w.explain(err))
	}
	w.touch()
	ok := resp.StatusCode/100 == 2
	if resp.StatusCode == http.StatusTooManyRequests {
		t.throttled(time.Now(), o.retryAfter(resp.Header, time.Now()))
	}
	if ok && isEventStream(resp.Header.Get("Content-Type")) {
		head, err := peekEvent(resp.Body, w)
		if err != nil {
			_ = resp.Body.Close()
			return fail(err)
		}
		resp.Body = &streamBody{head: head, rc: resp.Body, w: w, t: t}
		return resp, nil
	}
	data, err := readWhole(resp.Body, resp.ContentLength, w)
	_ = resp.Body.Close()
	switch {
	case err != nil || !ok:
	case !isJSONObject(data):
		err = &FailureError{Kind: FailureBadAnswer, Err: fmt.Errorf("a %d answer that is no JSON object (%d bytes)", resp.StatusCode, len(data))}
	case endsAtClose(resp) && !json.Valid(data):
		err = &FailureError{Kind: FailureConnection, Err: fmt.Errorf("connection closed in the middle of a %d answer (%d bytes)", resp.StatusCode, len(data))}
	}
	if err != nil {
		return fail(err)
	}
	w.stop()
	t.done(ok)
	resp.Body, resp.ContentLength = newWholeBody(data), int64(len(data))
	return resp, nil
}

// endsAtClose reports whether an HTTP/1 answer has neither a length nor
// chunks: its end is the connection's close, so a connection cut in the
// middle of it reads as a short answer, not as an error. Such an answer is
// checked to be whole JSON; the check is for this framing only, which
// providers rarely use, so it costs the usual answer nothing.
func endsAtClose(resp *http.Response) bool {
	return resp.ProtoMajor == 1 && resp.ContentLength < 0 && len(resp.TransferEncoding) == 0 && !resp.Uncompressed
}

// or is d, or def when d is not positive.
func or(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// statusOverloaded is Anthropic's "overloaded_error".
const statusOverloaded = 529

func retryable(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout, statusOverloaded:
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
