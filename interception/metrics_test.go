package interception_test

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/internal/metrics"
	"github.com/evalflow/evalflow/providers"
)

// metricValue is the value of the series of name with exactly labels (a
// histogram's count), or -1 when there is none.
func metricValue(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if len(got) != len(labels) {
				continue
			}
			match := true
			for k, v := range labels {
				match = match && got[k] == v
			}
			if !match {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return -1
}

func TestMetricsCountRelayedCallsAndRetries(t *testing.T) {
	var calls atomic.Int32
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			writeJSON(w, http.StatusServiceUnavailable, `{"error":{"message":"busy","type":"server_error","code":null}}`)
			return
		}
		writeJSON(w, http.StatusOK, toolCompletion)
	})
	m := metrics.New()
	f := newFixture(t, up.URL, func(c *interception.Config) { c.Metrics = m })
	_, err := f.client(f.slot.Secret).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	require.NoError(t, err)
	f.turn(t) // recorded, and counted before

	reg := m.Registry()
	chat := map[string]string{"dialect": dialects.NameChat}
	assert.Equal(t, 1.0, metricValue(t, reg, "evalflow_interception_requests_total", map[string]string{"dialect": "chat", "arm": "relay", "status": "200"}))
	assert.Equal(t, 1.0, metricValue(t, reg, "evalflow_upstream_retries_total", chat), "the 503 was retried once")
	assert.Equal(t, 1.0, metricValue(t, reg, "evalflow_upstream_latency_seconds", chat))
	assert.Equal(t, 1.0, metricValue(t, reg, "evalflow_upstream_ttft_seconds", chat))
	assert.Equal(t, -1.0, metricValue(t, reg, "evalflow_upstream_failures_total", map[string]string{"kind": "status"}), "the call did not fail")
}

func TestMetricsCountTranslatedCallsAndFailures(t *testing.T) {
	m := metrics.New()
	f := dialectFixture(t, dialects.NameAnthropic, mockUpstream(t), func(c *interception.Config) { c.Metrics = m })
	chatConversation(t, f, false)
	f.turns(t, 2)
	assert.Equal(t, 2.0, metricValue(t, m.Registry(), "evalflow_interception_requests_total",
		map[string]string{"dialect": "chat", "arm": "translate", "status": "200"}))

	down := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusServiceUnavailable, `{"error":{"message":"busy","type":"server_error","code":null}}`)
	})
	m = metrics.New()
	f = newFixture(t, down.URL, func(c *interception.Config) { c.Metrics = m })
	_, err := f.client(f.slot.Secret).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	require.Error(t, err)
	turn := f.turn(t)
	require.NotEmpty(t, turn.UpstreamFailure)
	assert.Equal(t, 1.0, metricValue(t, m.Registry(), "evalflow_upstream_failures_total", map[string]string{"kind": string(turn.UpstreamFailure)}))
	assert.Equal(t, 1.0, metricValue(t, m.Registry(), "evalflow_interception_requests_total",
		map[string]string{"dialect": "chat", "arm": "relay", "status": strconv.Itoa(turn.Status)}))
	assert.Equal(t, float64(providers.DefaultMaxAttempts-1), metricValue(t, m.Registry(), "evalflow_upstream_retries_total", map[string]string{"dialect": "chat"}),
		"every attempt after the first")
}

// A nil *Metrics records nothing and is safe everywhere it is taken.
func TestNilMetrics(t *testing.T) {
	var m *metrics.Metrics
	assert.NotPanics(t, func() {
		m.RolloutStarted()
		m.RolloutFinished("ok", "")
		m.Called(metrics.Call{Dialect: "chat"})
		m.TunnelsUp(func() int { return 1 })
	})
}
