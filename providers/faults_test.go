package providers

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
)

const (
	completion = `{"id":"c1","object":"chat.completion","choices":[]}`
	firstEvent = "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n"
	lastEvent  = "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
)

// fault is how a fake provider fails an answer.
type fault func(w http.ResponseWriter, r *http.Request)

var (
	// cutMidBody announces 100 bytes, sends 10 and drops the connection.
	cutMidBody fault = func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "100")
		_, _ = io.WriteString(w, `{"id":"c1"`)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	// cutAtClose answers without a length or chunks, so that only the
	// connection's close ends the body, and closes it after an inner
	// object: what arrived starts with { and ends with } like a whole one.
	cutAtClose fault = func(w http.ResponseWriter, _ *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		defer conn.Close()
		_, _ = io.WriteString(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"+`{"id":"c1","choices":[{"index":0}`)
		_ = buf.Flush()
	}
	// hangBeforeHeaders answers nothing until the caller gives up.
	hangBeforeHeaders fault = func(_ http.ResponseWriter, r *http.Request) {
		hang(r)
	}
	// hangMidBody sends part of a JSON answer, then nothing.
	hangMidBody fault = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1"`)
		w.(http.Flusher).Flush()
		hang(r)
	}
	// invalidJSON answers 200 with an HTML page.
	invalidJSON fault = func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "<html>upstream connect error</html>")
	}
	// emptyStream opens an event stream and ends it at once.
	emptyStream fault = func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
	}
	// streamCutBeforeFirstEvent sends half an event and drops the connection.
	streamCutBeforeFirstEvent fault = func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"c1",`)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	// streamHangBeforeFirstEvent opens an event stream and sends nothing.
	streamHangBeforeFirstEvent fault = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		hang(r)
	}
)

// hang waits until the caller hangs up. The body is read first: only then
// does the server notice a connection closed under the handler.
func hang(r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

// faultyUpstream fails the first fails calls with f and answers the
// others; calls counts them all.
func faultyUpstream(t *testing.T, f fault, fails int32, calls *atomic.Int32) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= fails {
			f(w, r)
			return
		}
		if r.Header.Get("Accept") == "text/event-stream" {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, firstEvent+lastEvent)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, completion)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// faultClient is a client of srv with negligible backoff and short
// timeouts: short enough for a test to wait for them, long enough for an
// upstream that answers at once to be in time on a loaded machine.
func faultClient(srv *httptest.Server) *Client {
	c := fastRetries(NewOpenAI(srv.URL+"/v1", "sk-secret-key"))
	c.ResponseHeaderTimeout = 250 * time.Millisecond
	c.StreamIdleTimeout = 250 * time.Millisecond
	return c
}

func bodyOf(s string) dialects.Body { return dialects.Body{[]byte(s)} }

func relay(c *Client, stream bool) (*http.Response, int, error) {
	h := http.Header{}
	if stream {
		h.Set("Accept", "text/event-stream")
	}
	return c.Relay(context.Background(), "/chat/completions", h, bodyOf(`{"model":"m"}`))
}

// Every failure before the answer reaches the caller is an attempt that
// fails and is retried: a failure that lasts gets MaxAttempts calls and a
// *RetryError naming it, one that passes gets the answer.
func TestRelayRetriesFailedAnswers(t *testing.T) {
	tests := []struct {
		name   string
		f      fault
		stream bool
		want   string
	}{
		{"cut mid-body", cutMidBody, false, FailureConnection},
		{"cut mid-body, framed by the close", cutAtClose, false, FailureConnection},
		{"hang before headers", hangBeforeHeaders, false, FailureTimeout},
		{"hang mid-body", hangMidBody, false, FailureTimeout},
		{"invalid JSON with 200", invalidJSON, false, FailureBadAnswer},
		{"stream ends before its first event", emptyStream, true, FailureTruncated},
		{"stream cut before its first event", streamCutBeforeFirstEvent, true, FailureConnection},
		{"stream hangs before its first event", streamHangBeforeFirstEvent, true, FailureTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/lasting", func(t *testing.T) {
			var calls atomic.Int32
			c := faultClient(faultyUpstream(t, tt.f, 100, &calls))
			_, attempts, err := relay(c, tt.stream)
			var re *RetryError
			require.ErrorAs(t, err, &re)
			var f *FailureError
			require.ErrorAs(t, err, &f)
			assert.Equal(t, tt.want, f.Kind, "%v", err)
			assert.Equal(t, tt.want == FailureTimeout, f.Timeout())
			assert.Equal(t, DefaultMaxAttempts, attempts)
			if f.Timeout() {
				// An attempt may time out before its request reaches the handler.
				assert.LessOrEqual(t, calls.Load(), int32(DefaultMaxAttempts))
			} else {
				assert.Equal(t, int32(DefaultMaxAttempts), calls.Load())
			}
			assert.NotContains(t, err.Error(), "sk-secret-key")
			_, inFlight := c.ConcurrencyLimit()
			assert.Zero(t, inFlight, "every attempt gave its place back")
		})
		t.Run(tt.name+"/passing", func(t *testing.T) {
			var calls atomic.Int32
			c := faultClient(faultyUpstream(t, tt.f, 1, &calls))
			resp, attempts, err := relay(c, tt.stream)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			if tt.stream {
				assert.Equal(t, firstEvent+lastEvent, string(body))
			} else {
				assert.Equal(t, completion, string(body))
			}
			assert.Equal(t, 2, attempts)
			assert.Equal(t, int32(2), calls.Load())
		})
	}
}

// Once a stream's first event is in, the rest is the caller's: a
// connection that breaks or idles is an error of its reads, not retried.
func TestRelayStreamFailsAfterItsFirstEvent(t *testing.T) {
	tests := []struct {
		name string
		rest func(w http.ResponseWriter, r *http.Request)
		want string
	}{
		{"cut", func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }, FailureConnection},
		{"hang", func(_ http.ResponseWriter, r *http.Request) { hang(r) }, FailureTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, firstEvent)
				w.(http.Flusher).Flush()
				tt.rest(w, r)
			}))
			defer srv.Close()
			c := faultClient(srv)
			resp, attempts, err := relay(c, true)
			require.NoError(t, err)
			assert.Equal(t, 1, attempts)
			body, err := io.ReadAll(resp.Body)
			assert.Equal(t, firstEvent, string(body))
			var f *FailureError
			require.ErrorAs(t, err, &f)
			assert.Equal(t, tt.want, f.Kind, "%v", err)
			_, inFlight := c.ConcurrencyLimit()
			assert.Zero(t, inFlight, "the broken stream gave its place back")
			require.NoError(t, resp.Body.Close())
			assert.Equal(t, int32(1), calls.Load())
		})
	}
}

// RelayOnce is for a caller that retries on its own: one attempt, whatever
// the failure.
func TestRelayOnceMakesOneAttempt(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		var calls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			calls.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, `{"error":{"message":"busy"}}`)
		}))
		c := faultClient(srv)
		resp, attempts, err := c.RelayOnce(context.Background(), "/chat/completions", nil, bodyOf(`{}`))
		require.NoError(t, err)
		_ = resp.Body.Close()
		srv.Close()
		assert.Equal(t, status, resp.StatusCode)
		assert.Equal(t, 1, attempts)
		assert.Equal(t, int32(1), calls.Load())
	}

	var calls atomic.Int32
	c := faultClient(faultyUpstream(t, cutMidBody, 100, &calls))
	_, attempts, err := c.RelayOnce(context.Background(), "/chat/completions", nil, bodyOf(`{}`))
	var f *FailureError
	require.ErrorAs(t, err, &f)
	assert.Equal(t, FailureConnection, f.Kind)
	assert.Equal(t, 1, attempts)
	assert.Equal(t, int32(1), calls.Load())
}

// A call the caller gives up on while the provider hangs ends with the
// caller's context error, not a timeout of the provider's.
func TestRelayCallerGivesUpWhileTheProviderHangs(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		cancel()
		hang(r)
	}))
	defer srv.Close()
	c := NewOpenAI(srv.URL+"/v1", "")
	_, attempts, err := c.Relay(ctx, "/chat/completions", nil, bodyOf(`{}`))
	require.ErrorIs(t, err, context.Canceled)
	var f *FailureError
	assert.False(t, errors.As(err, &f), "%v", err)
	assert.Zero(t, attempts)
}
