package loadgen_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/bench/internal/loadgen"
	"github.com/evalflow/evalflow/bench/internal/upstream"
)

func TestSummarize(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var out []time.Duration
		for _, n := range ns {
			out = append(out, time.Duration(n)*time.Millisecond)
		}
		return out
	}
	tests := []struct {
		in       []time.Duration
		p50, p99 float64
	}{
		{in: nil},
		{in: ms(5), p50: 5000, p99: 5000},
		{in: ms(4, 1, 3, 2), p50: 2000, p99: 4000},
		{in: ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), p50: 5000, p99: 10000},
	}
	for _, tt := range tests {
		s := loadgen.Summarize(tt.in)
		assert.Equal(t, tt.p50, s.P50, "Summarize(%v).P50", tt.in)
		assert.Equal(t, tt.p99, s.P99, "Summarize(%v).P99", tt.in)
		assert.Equal(t, len(tt.in), s.N)
	}
}

// counting is a target that answers 200 and counts its calls.
func counting(t *testing.T) (loadgen.Target, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	return loadgen.Target{Name: "t", URL: srv.URL, Body: []byte(`{}`)}, &n
}

func TestInterleavedCallsEveryTargetInTurn(t *testing.T) {
	a, na := counting(t)
	b, nb := counting(t)
	b.Name = "u"
	lat, failed, err := loadgen.Interleaved(context.Background(), loadgen.NewClient(2), []loadgen.Target{a, b}, 10, 2)
	require.NoError(t, err)
	assert.Empty(t, failed)
	assert.Len(t, lat["t"], 10)
	assert.Len(t, lat["u"], 10)
	assert.Equal(t, int64(12), na.Load(), "warm-up calls count too")
	assert.Equal(t, int64(12), nb.Load())
}

// flaky fails its calls numbered in fail (from 1), answering the others.
type flaky struct {
	calls int
	fail  map[int]bool
}

func (f *flaky) Do(_ context.Context, t loadgen.Target) (time.Duration, error) {
	f.calls++
	if f.fail[f.calls] {
		return 0, errors.New(t.Name + ": read answer: unexpected EOF")
	}
	return time.Duration(f.calls), nil
}

func TestInterleavedSettlesBetweenRounds(t *testing.T) {
	a, na := counting(t)
	settled := 0
	a.Settle = func() {
		settled++
		assert.Zero(t, na.Load()%16, "settled after whole rounds only")
	}
	_, _, err := loadgen.Interleaved(context.Background(), loadgen.NewClient(1), []loadgen.Target{a}, 40, 8)
	require.NoError(t, err)
	assert.Equal(t, 3, settled, "48 rounds, settled every 16")
}

func TestInterleavedRetriesAndReportsFailures(t *testing.T) {
	tg := loadgen.Target{Name: "t"}
	f := &flaky{fail: map[int]bool{2: true, 3: true}}
	lat, failed, err := loadgen.Interleaved(context.Background(), f, []loadgen.Target{tg}, 3, 0)
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{1, 4, 5}, lat["t"], "the failed calls' sample is the next try's")
	assert.Equal(t, 2, failed["t"])

	f = &flaky{fail: map[int]bool{2: true, 3: true, 4: true}}
	_, failed, err = loadgen.Interleaved(context.Background(), f, []loadgen.Target{tg}, 3, 0)
	require.ErrorContains(t, err, "unexpected EOF", "a call failing every try ends the run")
	assert.Equal(t, 3, failed["t"])
}

func TestLoadStopsByItself(t *testing.T) {
	tg, n := counting(t)
	tests := []struct {
		name string
		rate float64
	}{{"closed", 0}, {"paced", 200}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := n.Load()
			r := loadgen.Load(context.Background(), loadgen.NewClient(4), tg, 4, tt.rate, 200*time.Millisecond)
			assert.Zero(t, r.Errors)
			assert.Equal(t, int64(r.Requests), n.Load()-before)
			if tt.rate > 0 {
				assert.LessOrEqual(t, r.Requests, 40, "a paced load sends no more than rate × duration")
			}
		})
	}
}

func TestLoadCountsSettleInTheWindow(t *testing.T) {
	tg, n := counting(t)
	var atSettle int64 = -1
	tg.Settle = func() {
		atSettle = n.Load()
		time.Sleep(300 * time.Millisecond) // deferred work being modelled, not synchronization
	}
	r := loadgen.Load(context.Background(), loadgen.NewClient(4), tg, 4, 0, 100*time.Millisecond)
	assert.Equal(t, int64(r.Requests), atSettle, "Settle runs once every client is done")
	assert.LessOrEqual(t, r.RPS, float64(r.Requests)/0.4, "the window includes Settle's time")
}

func TestStreamsCountsEveryEvent(t *testing.T) {
	base, stop, err := upstream.Listen(upstream.New(upstream.Config{Events: 4}), false)
	require.NoError(t, err)
	defer stop()
	tg := loadgen.Target{Name: "mock", URL: base + upstream.PathChat, Body: []byte(`{"stream":true}`)}
	called := false
	r := loadgen.NewClient(8).Streams(context.Background(), tg, 8, 4, 0, func() { called = true })
	assert.True(t, called)
	assert.Equal(t, 8, r.Completed)
	assert.Zero(t, r.Errors)
	assert.Zero(t, r.Lost)
	assert.Equal(t, 32, r.Delay.N)
}
