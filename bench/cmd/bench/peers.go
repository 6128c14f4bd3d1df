package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/evalflow/evalflow/bench/internal/loadgen"
	"github.com/evalflow/evalflow/bench/internal/targets"
	"github.com/evalflow/evalflow/bench/internal/upstream"
)

// tPortkey names the Portkey gateway's target.
const tPortkey = "portkey"

// Peers is the peers section: evalflow's arms next to a bare reverse proxy
// and a real LLM gateway (Portkey), at 4 KB and 64 KB, in one run.
type Peers struct {
	Rows []PeerRow `json:"rows"`
	// Unavailable says why Portkey is missing from Rows, when it is.
	Unavailable string `json:"unavailable,omitempty"`
	// Streaming is what a stream through Portkey did.
	Streaming *PeerStream `json:"streaming,omitempty"`
}

// PeerRow is one target at one body size.
type PeerRow struct {
	Size    string          `json:"size"`
	Target  string          `json:"target"`
	Latency loadgen.Summary `json:"latency"`
	// Added is over the mock reached directly.
	Added  loadgen.Added `json:"added"`
	Failed int           `json:"failed_calls,omitempty"`
	// FirstError is what the target's first failed call said, in any
	// phase (warm-up included).
	FirstError string `json:"first_error,omitempty"`
	// Closed is the closed-loop load of Clients clients, summed over the
	// target's windows.
	Closed loadgen.LoadResult `json:"closed_loop"`
	// CPU is the CPU time per call during the target's load windows: this
	// process (load generator, mock, the Go targets, the trace's deferred
	// parse) plus, for Portkey, the gateway's node process. AddedCPU is
	// minus the direct target's, the target's own cost per call.
	CPU float64 `json:"cpu_us_per_call"`
	// Faults is this process's minor page faults per call in the
	// target's windows: memory touched for the first time (or again after
	// the runtime gave it back), which costs far more than reusing it.
	Faults float64 `json:"minor_faults_per_call"`
	// RoundRPS is the req/s of each of the target's load windows, in
	// the order they ran.
	RoundRPS []float64 `json:"round_rps,omitempty"`
	AddedCPU float64   `json:"added_cpu_us_per_call"`
}

// PeerStream is one stream through a peer.
type PeerStream struct {
	Target string `json:"target"`
	Events int    `json:"events"`
	Error  string `json:"error,omitempty"`
	// Output is the tail of the peer's log when the stream failed.
	Output string `json:"output,omitempty"`
}

// peerClients is the closed-loop load of the peers section.
const peerClients = 64

func peersSection(ctx context.Context, o options, logf func(string, ...any)) (*Peers, error) {
	sizes := []struct {
		name    string
		bytes   int
		n, warm int
	}{{"4KB", 4 << 10, 1000, 100}, {"64KB", 64 << 10, 600, 50}}
	window, rounds := 1500*time.Millisecond, 3
	if o.quick {
		sizes[0].n, sizes[1].n = 200, 100
		window, rounds = 500*time.Millisecond, 1
	}
	out := &Peers{}
	for _, sz := range sizes {
		a, err := newArms(upstream.Config{BodyBytes: sz.bytes})
		if err != nil {
			return nil, err
		}
		body := targets.Body(targets.Chat, sz.bytes, false)
		ts := a.chatTargets(body)
		var pk *targets.Portkey
		if out.Unavailable == "" {
			pk, err = targets.StartPortkey(ctx, targets.PortkeyDir(), a.base)
			switch {
			case errors.Is(err, targets.ErrPeerUnavailable):
				out.Unavailable = err.Error()
				logf("  portkey unavailable, left out: %v", err)
			case err != nil:
				out.Unavailable = "portkey did not start: " + err.Error()
				logf("  %s", out.Unavailable)
			default:
				ts = append(ts, pk.Target(tPortkey, body))
			}
		}
		rows, err := peerRows(ctx, sz.name, ts, pk, sz.n, sz.warm, window, rounds)
		if err == nil && pk != nil && out.Streaming == nil {
			out.Streaming = peerStream(ctx)
		}
		if pk != nil {
			_ = pk.Close()
		}
		a.close()
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			logf("  %-5s %-13s p50 %8.1fµs added %7.1fµs | %d clients %7.0f rps | CPU %6.1fµs/call, added %6.1fµs",
				r.Size, r.Target, r.Latency.P50, r.Added.P50, peerClients, r.Closed.RPS, r.CPU, r.AddedCPU)
		}
		out.Rows = append(out.Rows, rows...)
	}
	if s := out.Streaming; s != nil {
		logf("  portkey stream: %d events, error: %q", s.Events, s.Error)
	}
	return out, nil
}

// peerRows measures the targets ts at one body size: latency one request
// at a time, interleaved, then closed-loop windows of peerClients clients
// taking turns, rounds times, with the CPU each window used.
func peerRows(ctx context.Context, size string, ts []loadgen.Target, pk *targets.Portkey, n, warm int, window time.Duration, rounds int) ([]PeerRow, error) {
	hc := loadgen.NewClient(peerClients)
	defer hc.HTTP.CloseIdleConnections()
	c := &errorLog{Doer: hc, first: map[string]string{}, count: map[string]int{}}
	lat, failed, err := loadgen.Interleaved(ctx, c, ts, n, warm)
	if err != nil {
		return nil, err
	}
	for _, t := range ts { // warm every target's connections for the load
		loadgen.Load(ctx, c, t, peerClients, 0, window/3)
	}
	warmFailed := maps.Clone(c.count)
	for name, n := range failed {
		warmFailed[name] -= n // Interleaved's are counted by it
	}
	type acc struct {
		reqs, errs int
		elapsed    time.Duration
		cpu        time.Duration
		lat        []loadgen.Summary
		rps        []float64
		faults     int64
	}
	accs := make([]acc, len(ts))
	for round := range rounds {
		for j := range ts {
			k := (j + round) % len(ts)
			t := ts[k]
			cpu0, faults0, start := processCPU(), minorFaults(), time.Now()
			var peer0 time.Duration
			if t.Name == tPortkey {
				peer0 = pk.CPU()
			}
			res := loadgen.Load(ctx, c, t, peerClients, 0, window)
			elapsed := time.Since(start)
			accs[k].elapsed += elapsed
			accs[k].rps = append(accs[k].rps, float64(res.Requests)/elapsed.Seconds())
			accs[k].cpu += processCPU() - cpu0
			accs[k].faults += minorFaults() - faults0
			if t.Name == tPortkey {
				accs[k].cpu += pk.CPU() - peer0
			}
			accs[k].reqs += res.Requests
			accs[k].errs += res.Errors
			accs[k].lat = append(accs[k].lat, res.Latency)
		}
	}
	direct := Summarize(lat[tDirect])
	var rows []PeerRow
	var directCPU float64
	for k, t := range ts {
		x := accs[k]
		sum := Summarize(lat[t.Name])
		row := PeerRow{Size: size, Target: t.Name, Latency: sum, Added: sum.AddedOver(direct), Failed: failed[t.Name] + warmFailed[t.Name],
			FirstError: c.first[t.Name], RoundRPS: x.rps,
			Closed: loadgen.LoadResult{Clients: peerClients, Requests: x.reqs, Errors: x.errs, RPS: float64(x.reqs) / x.elapsed.Seconds(),
				Latency: worstP99(x.lat)}}
		if x.reqs > 0 {
			row.CPU = float64(x.cpu.Microseconds()) / float64(x.reqs)
			row.Faults = float64(x.faults) / float64(x.reqs)
		}
		if t.Name == tDirect {
			directCPU = row.CPU
		}
		rows = append(rows, row)
	}
	for i := range rows {
		rows[i].AddedCPU = rows[i].CPU - directCPU
	}
	return rows, nil
}

// errorLog is a Doer that keeps each target's first error and counts
// them all.
type errorLog struct {
	loadgen.Doer
	mu    sync.Mutex
	first map[string]string
	count map[string]int
}

func (e *errorLog) Do(ctx context.Context, t loadgen.Target) (time.Duration, error) {
	d, err := e.Doer.Do(ctx, t)
	if err != nil {
		e.mu.Lock()
		e.count[t.Name]++
		if _, ok := e.first[t.Name]; !ok {
			e.first[t.Name] = err.Error()
		}
		e.mu.Unlock()
	}
	return d, err
}

// Summarize is loadgen.Summarize.
var Summarize = loadgen.Summarize

// worstP99 keeps the summary of the window with the highest p99.
func worstP99(ss []loadgen.Summary) loadgen.Summary {
	var w loadgen.Summary
	for _, s := range ss {
		if s.P99 >= w.P99 {
			w = s
		}
	}
	return w
}

// peerStream streams one chat completion through the gateway from a mock
// of its own that streams, and says what happened.
func peerStream(ctx context.Context) *PeerStream {
	const events = 8
	base, stop, err := upstream.Listen(upstream.New(upstream.Config{Events: events, Gap: time.Millisecond}), false)
	if err != nil {
		return &PeerStream{Target: tPortkey, Error: "mock: " + err.Error()}
	}
	defer func() { _ = stop() }()
	spk, err := targets.StartPortkey(ctx, targets.PortkeyDir(), base)
	if err != nil {
		return &PeerStream{Target: tPortkey, Error: "start: " + err.Error()}
	}
	defer func() { _ = spk.Close() }()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	s := &PeerStream{Target: tPortkey}
	s.Events, s.Error = streamOnce(sctx, spk.Target(tPortkey, targets.Body(targets.Chat, 1<<10, true)))
	if s.Error == "" && s.Events < events {
		s.Error = fmt.Sprintf("%d of %d events arrived", s.Events, events)
	}
	if s.Error != "" {
		s.Output = errorLines(spk.Output(), 3)
	}
	return s
}

// streamOnce sends one streaming call to t and counts the content events
// of its answer; a failed call's error says what the peer answered.
func streamOnce(ctx context.Context, t loadgen.Target) (events int, failure string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(t.Body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header = t.Header()
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Sprintf("status %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	for line := range bytes.SplitSeq(body, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("data:")) && bytes.Contains(line, []byte(`"content"`)) {
			events++
		}
	}
	if err != nil {
		return events, "read answer: " + err.Error()
	}
	return events, ""
}

// errorLines is the last n lines of a log that speak of an error.
func errorLines(log string, n int) string {
	var lines []string
	// A spinner rewrites its line with \r: each rewrite is a line.
	for line := range strings.SplitSeq(strings.ReplaceAll(log, "\r", "\n"), "\n") {
		if strings.Contains(strings.ToLower(line), "error") {
			lines = append(lines, strings.TrimSpace(line))
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// minorFaults is this process's minor page faults so far.
func minorFaults() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Minflt
}

// processCPU is this process's CPU time, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peersMarkdown renders the peers section.
func peersMarkdown(r *Results) string {
	pe := r.Peers
	if pe == nil {
		return ""
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("### 1b. Peers: a bare reverse proxy and the Portkey gateway\n\n")
	p("`go run ./bench/cmd/bench -only peers`: chat completions; latency one call at a time, then windows of %d clients; CPU per call is this process's (and Portkey's node process's); added = minus `direct`'s. `%s` (`%s`) has no target: it is the peer a user would otherwise put in front of an agent.\n\n",
		peerClients, tPortkey, targets.PortkeyPackage)
	if pe.Unavailable != "" {
		p("**Portkey is missing from this run**: %s\n\n", pe.Unavailable)
	}
	find := func(size, target string) *PeerRow {
		for i := range pe.Rows {
			if pe.Rows[i].Size == size && pe.Rows[i].Target == target {
				return &pe.Rows[i]
			}
		}
		return nil
	}
	p("| body | target | added p50 µs | vs proxy | req/s | vs proxy | added CPU µs/call | vs proxy | failed |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range pe.Rows {
		rp := find(x.Size, tProxy)
		vsLat, vsRPS, vsCPU := "—", "—", "—"
		if x.Target != tDirect && x.Target != tProxy && rp != nil {
			vsLat = fmt.Sprintf("%.2f×", x.Added.P50/rp.Added.P50)
			vsRPS = fmt.Sprintf("%.0f%%", 100*x.Closed.RPS/rp.Closed.RPS)
			vsCPU = fmt.Sprintf("%.2f×", x.AddedCPU/rp.AddedCPU)
		}
		p("| %s | %s | %s | %s | %.0f | %s | %s | %s | %d |\n", x.Size, x.Target, dash(x.Target, x.Added.P50),
			vsLat, x.Closed.RPS, vsRPS, dash(x.Target, x.AddedCPU), vsCPU, x.Failed+x.Closed.Errors)
	}
	p("\n")
	for _, x := range pe.Rows {
		if x.FirstError != "" {
			p("- %s %s: %d failed, the first said: %s\n\n", x.Size, x.Target, x.Failed+x.Closed.Errors, mdCell(x.FirstError))
		}
	}
	if s := pe.Streaming; s != nil {
		if s.Error == "" {
			p("Streaming through Portkey: %d events arrived.\n\n", s.Events)
		} else {
			p("Streaming through %s **fails** (%d events arrived): %s\n\n", s.Target, s.Events, mdCell(s.Error))
		}
	}
	return b.String()
}

// mdCell makes s fit in one markdown table cell.
func mdCell(s string) string {
	s = strings.ReplaceAll(s, "|", "\\|")
	return strings.Join(strings.Fields(s), " ")
}
