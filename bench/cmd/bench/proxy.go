package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/evalflow/evalflow/bench/internal/loadgen"
	"github.com/evalflow/evalflow/bench/internal/targets"
	"github.com/evalflow/evalflow/bench/internal/upstream"
)

// arms are the endpoints in front of one mock: the mock itself, a bare
// reverse proxy, the relay arm per dialect and the translate arms (a chat
// caller of an Anthropic upstream, an Anthropic caller of a chat one).
type arms struct {
	base   string
	rp     *targets.Server
	relays map[string]*targets.Interception
	trans  *targets.Interception
	// transChat serves Anthropic callers from a chat upstream.
	transChat *targets.Interception
	closes    []func() error
}

func newArms(cfg upstream.Config) (*arms, error) {
	a := &arms{relays: map[string]*targets.Interception{}}
	base, stop, err := upstream.Listen(upstream.New(cfg), false)
	if err != nil {
		return nil, err
	}
	a.base = base
	a.closes = append(a.closes, stop)
	if a.rp, err = targets.ReverseProxy(base); err != nil {
		a.close()
		return nil, err
	}
	a.closes = append(a.closes, a.rp.Close)
	for _, d := range []string{targets.Chat, targets.Responses, targets.Anthropic} {
		up, err := targets.Upstream(d, base, false)
		if err != nil {
			a.close()
			return nil, err
		}
		i, err := targets.NewInterception(up)
		if err != nil {
			a.close()
			return nil, err
		}
		a.relays[d] = i
		a.closes = append(a.closes, i.Close)
	}
	up, err := targets.Upstream(targets.Anthropic, base, false)
	if err != nil {
		a.close()
		return nil, err
	}
	if a.trans, err = targets.NewInterception(up); err != nil {
		a.close()
		return nil, err
	}
	a.closes = append(a.closes, a.trans.Close)
	up, err = targets.Upstream(targets.Chat, base, false)
	if err != nil {
		a.close()
		return nil, err
	}
	if a.transChat, err = targets.NewInterception(up); err != nil {
		a.close()
		return nil, err
	}
	a.closes = append(a.closes, a.transChat.Close)
	return a, nil
}

func (a *arms) close() {
	for i := len(a.closes) - 1; i >= 0; i-- {
		_ = a.closes[i]()
	}
}

// target names.
const (
	tDirect    = "direct"
	tProxy     = "reverseproxy"
	tRelay     = "relay"
	tTranslate = "translate"
	// tTranslateAnthropic is an Anthropic caller of a chat upstream.
	tTranslateAnthropic = "translate-anthropic"
)

// translatedVersus is, per translated arm of the streaming section, the
// relay arm that reads the same upstream stream: chat → Anthropic is set
// against the Anthropic relay, Anthropic → chat against the chat relay.
var translatedVersus = map[string]string{
	tTranslate:          tRelay + "-" + targets.Anthropic,
	tTranslateAnthropic: tRelay,
}

// chatTargets are the four compared arms, on chat.
func (a *arms) chatTargets(body []byte) []loadgen.Target {
	return []loadgen.Target{
		targets.Direct(tDirect, a.base, targets.Chat, body),
		targets.Direct(tProxy, a.rp.URL, targets.Chat, body),
		a.relays[targets.Chat].Target(tRelay, targets.Chat, body),
		a.trans.Target(tTranslate, targets.Chat, body),
	}
}

// dialectTargets are the mock and the relay arm on the other two dialects.
func (a *arms) dialectTargets(size int, stream bool) []loadgen.Target {
	var ts []loadgen.Target
	for _, d := range []string{targets.Responses, targets.Anthropic} {
		body := targets.Body(d, size, stream)
		ts = append(ts, targets.Direct(tDirect+"-"+d, a.base, d, body), a.relays[d].Target(tRelay+"-"+d, d, body))
	}
	return ts
}

// dialectOf names the dialect of a target and its direct baseline.
func dialectOf(name string) (dialect, base string) {
	for _, d := range []string{targets.Responses, targets.Anthropic} {
		if len(name) > len(d) && name[len(name)-len(d):] == d {
			return d, tDirect + "-" + d
		}
	}
	return targets.Chat, tDirect
}

func latencySection(ctx context.Context, o options, logf func(string, ...any)) ([]LatencyRow, error) {
	sizes := []struct {
		name    string
		bytes   int
		n, warm int
	}{{"4KB", 4 << 10, 3000, 200}, {"1MB", 1 << 20, 400, 20}}
	if o.quick {
		sizes[0].n, sizes[1].n = 300, 20
	}
	c := loadgen.NewClient(4)
	var rows []LatencyRow
	for _, sz := range sizes {
		a, err := newArms(upstream.Config{BodyBytes: sz.bytes})
		if err != nil {
			return nil, err
		}
		ts := append(a.chatTargets(targets.Body(targets.Chat, sz.bytes, false)), a.dialectTargets(sz.bytes, false)...)
		lat, failed, err := loadgen.Interleaved(ctx, c, ts, sz.n, sz.warm)
		if err != nil {
			a.close()
			return nil, err
		}
		sum := map[string]loadgen.Summary{}
		for _, t := range ts {
			sum[t.Name] = loadgen.Summarize(lat[t.Name])
		}
		turns := map[string][2]int{}
		for d, i := range a.relays {
			n, e := i.Turns()
			turns[d] = [2]int{n, e}
		}
		n, e := a.trans.Turns()
		turns["translate"] = [2]int{n, e}
		for _, t := range ts {
			d, base := dialectOf(t.Name)
			row := LatencyRow{Size: sz.name, Target: t.Name, Dialect: d, Latency: sum[t.Name], Added: sum[t.Name].AddedOver(sum[base]),
				Failed: failed[t.Name]}
			switch {
			case t.Name == tTranslate:
				row.Turns, row.Errored = turns["translate"][0], turns["translate"][1]
			case t.Name == tRelay || t.Name == tRelay+"-"+d:
				row.Turns, row.Errored = turns[d][0], turns[d][1]
			}
			rows = append(rows, row)
			logf("  %s %-20s p50 %8.1fµs p99 %8.1fµs  added p50 %7.1fµs p99 %7.1fµs", sz.name, t.Name,
				row.Latency.P50, row.Latency.P99, row.Added.P50, row.Added.P99)
		}
		a.close()
	}
	return rows, nil
}

func throughputSection(ctx context.Context, o options, logf func(string, ...any)) ([]ThroughputRow, error) {
	a, err := newArms(upstream.Config{BodyBytes: 4 << 10})
	if err != nil {
		return nil, err
	}
	defer a.close()
	ts := a.chatTargets(targets.Body(targets.Chat, 4<<10, false))
	window, steps := 1500*time.Millisecond, 5
	if o.quick {
		window, steps = 500*time.Millisecond, 2
	}
	const bound = 5000.0 // µs
	var rows []ThroughputRow
	for _, clients := range []int{64, 512} {
		c := loadgen.NewClient(clients)
		// Warm the connections of every target.
		for _, t := range ts {
			loadgen.Load(ctx, c, t, clients, 0, 300*time.Millisecond)
		}
		byName := map[string]*ThroughputRow{}
		lo, hi := map[string]float64{}, map[string]float64{}
		for r, t := range rotate(ts, 0) {
			_ = r
			res := loadgen.Load(ctx, c, t, clients, 0, window)
			byName[t.Name] = &ThroughputRow{Target: t.Name, Clients: clients, Closed: res}
			hi[t.Name] = res.RPS * 1.05
		}
		for step := range steps {
			for _, t := range rotate(ts, step+1) {
				rate := (lo[t.Name] + hi[t.Name]) / 2
				ok := func(res loadgen.LoadResult) bool {
					return res.Errors == 0 && res.Latency.P99 < bound && res.RPS >= 0.95*rate
				}
				res := loadgen.Load(ctx, c, t, clients, rate, window)
				if !ok(res) {
					// A burst from another process can fail one window at
					// any rate: a rate fails only when two windows fail.
					res = loadgen.Load(ctx, c, t, clients, rate, window)
				}
				if ok(res) {
					lo[t.Name] = rate
					byName[t.Name].Under5ms = res
				} else {
					hi[t.Name] = rate
				}
			}
		}
		for _, t := range ts {
			row := byName[t.Name]
			rows = append(rows, *row)
			logf("  %3d clients %-13s closed %7.0f rps p99 %8.1fµs | p99<5ms: %7.0f rps (p99 %6.1fµs)", clients, t.Name,
				row.Closed.RPS, row.Closed.Latency.P99, row.Under5ms.RPS, row.Under5ms.Latency.P99)
		}
		c.HTTP.CloseIdleConnections()
	}
	return rows, nil
}

// rotate is ts starting at index k, so that no target always goes first.
func rotate(ts []loadgen.Target, k int) []loadgen.Target {
	out := make([]loadgen.Target, 0, len(ts))
	for i := range ts {
		out = append(out, ts[(i+k)%len(ts)])
	}
	return out
}

func streamingSection(ctx context.Context, o options, logf func(string, ...any)) ([]StreamRow, error) {
	const events, gap = 64, 20 * time.Millisecond
	a, err := newArms(upstream.Config{Events: events, Gap: gap})
	if err != nil {
		return nil, err
	}
	defer a.close()
	body := targets.Body(targets.Chat, 1<<10, true)
	ts := append(a.chatTargets(body), a.dialectTargets(1<<10, true)...)
	ts = append(ts, a.transChat.Target(tTranslateAnthropic, targets.Anthropic, targets.Body(targets.Anthropic, 1<<10, true)))
	rounds := 16
	if o.quick {
		rounds = 3
	}
	c := loadgen.NewClient(8)
	type acc struct {
		ttft, delay  []time.Duration
		gap          []time.Duration
		lost, merged int
		streams, evs int
	}
	accs := map[string]*acc{}
	for _, t := range ts {
		accs[t.Name] = &acc{}
	}
	var mu sync.Mutex
	for range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, len(ts))
		for _, t := range ts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := c.Stream(ctx, t, events)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				defer mu.Unlock()
				x := accs[t.Name]
				x.ttft = append(x.ttft, r.TTFT)
				x.delay = append(x.delay, r.Delays...)
				x.gap = append(x.gap, r.Gaps...)
				x.lost += r.Lost
				x.merged += r.Merged
				x.streams++
				x.evs += r.Events
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return nil, err
		}
	}
	var rows []StreamRow
	for _, t := range ts {
		x := accs[t.Name]
		d, base := dialectOf(t.Name)
		row := StreamRow{
			Target: t.Name, Dialect: d, Streams: x.streams, Events: x.evs, Lost: x.lost, Merged: x.merged,
			TTFT: loadgen.Summarize(x.ttft), Delay: loadgen.Summarize(x.delay), Gap: loadgen.Summarize(x.gap),
		}
		bt := loadgen.Summarize(accs[base].ttft)
		bd := loadgen.Summarize(accs[base].delay)
		row.AddedTTFT, row.AddedDelay = row.TTFT.AddedOver(bt), row.Delay.AddedOver(bd)
		if vs, ok := translatedVersus[t.Name]; ok {
			v := accs[vs]
			row.Versus = vs
			row.TTFTRatio = ratio(row.TTFT.P99, loadgen.Summarize(v.ttft).P99)
			row.DelayRatio = ratio(row.Delay.P99, loadgen.Summarize(v.delay).P99)
			row.GapRatio = ratio(row.Gap.P99, loadgen.Summarize(v.gap).P99)
		}
		rows = append(rows, row)
		logf("  %-20s ttft p50 %7.1fµs p99 %7.1fµs | event delay p50 %6.1fµs p99 %7.1fµs | gap p99 %8.1fµs | lost %d merged %d",
			t.Name, row.TTFT.P50, row.TTFT.P99, row.Delay.P50, row.Delay.P99, row.Gap.P99, row.Lost, row.Merged)
	}
	alone, err := ttftAlone(ctx, o)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		if s, ok := alone[rows[i].Target]; ok {
			rows[i].TTFTAlone = &s
			if vs := rows[i].Versus; vs != "" {
				rows[i].TTFTAloneRatioP50 = ratio(s.P50, alone[vs].P50)
				rows[i].TTFTAloneRatioP99 = ratio(s.P99, alone[vs].P99)
			}
			logf("  %-20s alone: ttft p50 %7.1fµs p99 %7.1fµs", rows[i].Target, s.P50, s.P99)
		}
	}
	for name, i := range map[string]*targets.Interception{tRelay: a.relays[targets.Chat], tTranslate: a.trans, tTranslateAnthropic: a.transChat} {
		if n, e := i.Turns(); e != 0 {
			return rows, fmt.Errorf("%s recorded %d of %d streamed turns with an error", name, e, n)
		}
	}
	return rows, nil
}

// ratio is a over b, to two decimals; 0 when b is.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return math.Round(100*a/b) / 100
}

// ttftAlone measures the TTFT of the translated arms and the relay arms
// they are set against on short streams (4 events, no gap), one stream at
// a time, the arms taking turns: the translate arm's own cost before the
// first event, without the section's concurrent streams around it.
func ttftAlone(ctx context.Context, o options) (map[string]loadgen.Summary, error) {
	a, err := newArms(upstream.Config{Events: 4})
	if err != nil {
		return nil, err
	}
	defer a.close()
	chat, anth := targets.Body(targets.Chat, 1<<10, true), targets.Body(targets.Anthropic, 1<<10, true)
	ts := []loadgen.Target{
		a.relays[targets.Chat].Target(tRelay, targets.Chat, chat),
		a.trans.Target(tTranslate, targets.Chat, chat),
		a.relays[targets.Anthropic].Target(tRelay+"-"+targets.Anthropic, targets.Anthropic, anth),
		a.transChat.Target(tTranslateAnthropic, targets.Anthropic, anth),
	}
	n := 1000
	if o.quick {
		n = 50
	}
	c := loadgen.NewClient(4)
	ttft := map[string][]time.Duration{}
	for i := range n {
		for k := range ts {
			t := ts[(i+k)%len(ts)] // each arm first in turn
			r, err := c.Stream(ctx, t, 4)
			if err != nil {
				return nil, err
			}
			ttft[t.Name] = append(ttft[t.Name], r.TTFT)
		}
	}
	out := map[string]loadgen.Summary{}
	for name, ds := range ttft {
		out[name] = loadgen.Summarize(ds)
	}
	return out, nil
}
