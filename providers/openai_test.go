package providers

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/devserver/devtest"
)

// fastRetries makes backoff negligible so tests do not wait.
func fastRetries(o *OpenAI) *OpenAI {
	o.BaseDelay = time.Microsecond
	o.MaxDelay = time.Microsecond
	return o
}

func TestOpenAIDoSendsRequest(t *testing.T) {
	tests := []struct {
		key      string
		wantAuth string
	}{
		{"sk-test", "Bearer sk-test"},
		{"", ""},
	}
	for _, tt := range tests {
		var gotAuth, gotType, gotPath string
		var gotBody []byte
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			gotAuth, gotType, gotPath = r.Header.Get("Authorization"), r.Header.Get("Content-Type"), r.URL.Path
			gotBody, _ = io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"ok":true}`)
		}))
		resp, attempts, err := NewOpenAI(srv.URL+"/v1/", tt.key).Do(context.Background(), "/chat/completions", []byte(`{"model":"m"}`))
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		srv.Close()

		assert.Equal(t, tt.wantAuth, gotAuth, "Authorization with key %q", tt.key)
		assert.Equal(t, "application/json", gotType)
		assert.Equal(t, "/v1/chat/completions", gotPath)
		assert.Equal(t, `{"model":"m"}`, string(gotBody))
		assert.Equal(t, `{"ok":true}`, string(body))
		assert.Equal(t, 1, attempts)
	}
}

func TestOpenAIDoRetries(t *testing.T) {
	tests := []struct {
		name         string
		statuses     []int
		retryAfter   string
		wantStatus   int
		wantAttempts int
		wantCalls    int32
	}{
		{"503 then 200", []int{503, 200}, "", 200, 2, 2},
		{"429 with Retry-After then 200", []int{429, 200}, "0", 200, 2, 2},
		{"500 502 504 then 200", []int{500, 502, 504, 200}, "", 200, 4, 4},
		{"400 is not retried", []int{400, 200}, "", 400, 1, 1},
		{"exhausted returns last error", []int{503, 503, 503, 503, 200}, "", 503, 4, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := calls.Add(1)
				status := tt.statuses[n-1]
				w.Header().Set("Content-Type", "application/json")
				if status != 200 && tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				w.WriteHeader(status)
				_, _ = io.WriteString(w, `{"call":`+string(rune('0'+n))+`}`)
			}))
			defer srv.Close()

			resp, attempts, err := fastRetries(NewOpenAI(srv.URL+"/v1", "k")).Do(context.Background(), "/chat/completions", []byte(`{}`))
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			assert.Equal(t, tt.wantStatus, resp.StatusCode)
			assert.Equal(t, tt.wantAttempts, attempts)
			assert.Equal(t, tt.wantCalls, calls.Load())
			assert.Equal(t, `{"call":`+string(rune('0'+tt.wantCalls))+`}`, string(body), "the last response's body is intact")
		})
	}
}

func TestOpenAIDoConnectionError(t *testing.T) {
	o := fastRetries(NewOpenAI("http://"+devtest.FreeAddr(t)+"/v1", "sk-secret-key"))
	o.MaxAttempts = 3
	_, attempts, err := o.Do(context.Background(), "/chat/completions", []byte(`{}`))
	var re *RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 3, re.Attempts())
	assert.Equal(t, 3, attempts)
	assert.NotContains(t, err.Error(), "sk-secret-key")
}

func TestOpenAIDoStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		cancel()
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	_, _, err := NewOpenAI(srv.URL+"/v1", "").Do(ctx, "/chat/completions", []byte(`{}`))
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int32(1), calls.Load())
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	o := &OpenAI{MaxRetryAfter: 30 * time.Second}
	tests := []struct {
		header, value string
		want          time.Duration
	}{
		{"Retry-After", "2", 2 * time.Second},
		{"Retry-After", "0", 0},
		{"Retry-After", "1.5", 1500 * time.Millisecond},
		{"Retry-After", "120", 30 * time.Second},
		{"Retry-After", now.Add(10 * time.Second).Format(http.TimeFormat), 10 * time.Second},
		{"Retry-After", now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"Retry-After", "soon", -1},
		{"Retry-After-Ms", "250", 250 * time.Millisecond},
		{"X-Other", "5", -1},
	}
	for _, tt := range tests {
		h := http.Header{}
		h.Set(tt.header, tt.value)
		assert.Equal(t, tt.want, o.retryAfter(h, now), "retryAfter(%s: %q)", tt.header, tt.value)
	}
}

func TestBackoff(t *testing.T) {
	o := &OpenAI{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}
	tests := []struct {
		attempt  int
		lo, high time.Duration
	}{
		{1, 50 * time.Millisecond, 100 * time.Millisecond},
		{2, 100 * time.Millisecond, 200 * time.Millisecond},
		{4, 400 * time.Millisecond, 800 * time.Millisecond},
		{10, 500 * time.Millisecond, time.Second},
	}
	for _, tt := range tests {
		for range 20 {
			d := o.backoff(tt.attempt)
			assert.True(t, d >= tt.lo && d <= tt.high, "backoff(%d) = %v, want in [%v, %v]", tt.attempt, d, tt.lo, tt.high)
		}
	}
}
