package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

// TestMetricsAfterRun runs a small eval on the embedded server with the
// worker's metrics endpoint on, scrapes it over HTTP, and checks the counters
// against the run store.
func TestMetricsAfterRun(t *testing.T) {
	t.Parallel()
	skipShort(t)
	_, c := devtest.StartEvalflow(t)
	runsDir := t.TempDir()
	w := startWorker(t, c, wiring.Config{
		TaskQueue: "metrics", RunsDir: runsDir, MaxRollouts: 4,

		MetricsAddr: "127.0.0.1:0",
	})
	require.NotEmpty(t, w.MetricsAddr())

	const tasks = 6
	cfg := workflows.RunConfig{RunID: "metrics-run", Taskset: "sample", Tasks: tasks, MaxConcurrent: 3, Model: "mock"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: cfg.RunID, TaskQueue: "metrics"}, wiring.EvalWorkflowName, workflows.EvalInput{Config: cfg})
	require.NoError(t, err)
	var res workflows.Result
	require.NoError(t, run.Get(ctx, &res))
	require.Equal(t, int64(tasks), res.Rollouts)

	store := storetest.Files(t, runsDir)
	recs := mustList(t, store, cfg.RunID)
	require.Len(t, recs, tasks)
	var ok, turns int
	var cost float64
	for _, r := range recs {
		if r.Status == rollout.StatusOK {
			ok++
		}
		turns += r.Turns
		cost += r.CostUSD
		assert.Zero(t, r.UnpricedTurns, "the mock has a price")
	}
	require.Positive(t, turns)
	require.Positive(t, cost, "the mock's calls cost something at its bundled price")
	assert.InDelta(t, cost, res.CostUSD, 1e-12, "the run's cost sums its rollouts'")

	var fams map[string]*dto.MetricFamily
	// The SDK's metrics reach the registry at its reporting interval.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		fams = scrape(c, "http://"+w.MetricsAddr()+"/metrics")
		assert.True(c, hasPrefix(fams, "temporal_"), "a temporal_ SDK metric is served")
	}, 30*time.Second, 100*time.Millisecond)

	assert.Equal(t, float64(tasks), sum(fams, "evalflow_rollouts_started_total", nil))
	assert.Equal(t, float64(ok), sum(fams, "evalflow_rollouts_finished_total", map[string]string{"status": "ok"}))
	assert.Equal(t, float64(tasks), sum(fams, "evalflow_rollouts_finished_total", nil), "every rollout ran once")
	assert.Zero(t, sum(fams, "evalflow_rollouts_in_flight", nil))
	assert.Equal(t, float64(turns), sum(fams, "evalflow_interception_requests_total", nil), "one request per stored turn")
	assert.Equal(t, float64(turns), sum(fams, "evalflow_interception_requests_total",
		map[string]string{"dialect": "chat", "arm": "relay", "status": "200"}))
	assert.Equal(t, float64(turns), sum(fams, "evalflow_upstream_latency_seconds", nil), "one latency observation per turn")
	assert.Equal(t, float64(turns), sum(fams, "evalflow_upstream_ttft_seconds", nil), "every turn got a first byte")
	assert.InDelta(t, cost, sum(fams, "evalflow_model_cost_usd_total", nil), 1e-12, "the cost metric counts the stored rollouts'")
	assert.Contains(t, fams, "evalflow_tunnels_up")
	assert.Contains(t, fams, "go_goroutines")
}

// scrape reads a Prometheus text exposition over HTTP.
func scrape(t assert.TestingT, url string) map[string]*dto.MetricFamily {
	resp, err := http.Get(url)
	if !assert.NoError(t, err) {
		return nil
	}
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	assert.NoError(t, err)
	return fams
}

func hasPrefix(fams map[string]*dto.MetricFamily, prefix string) bool {
	for name := range fams {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// sum adds the values of a family's series whose labels include want: the
// counter's or gauge's value, or a histogram's count.
func sum(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var total float64
	f, ok := fams[name]
	if !ok {
		return -1
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Histogram != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return total
}
