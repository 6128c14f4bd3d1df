package main

import (
	"fmt"
	"math"
	"strings"
)

// goal is one performance target, read from a run's results.
type goal struct {
	what, target string
	// value says the figure; ok is false when the run has no figure.
	value func(*Results) (v float64, shown string, ok bool)
	// met says whether v meets the target.
	met func(v float64) bool
	// bound is what holds the figure back when the target is missed.
	bound string
}

// goalsMarkdown renders the one table of the performance targets: every
// figure from this run, beside the target, and for a missed target by how
// much and what bounds it.
func goalsMarkdown(r *Results) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("### Targets, from this run\n\n")
	p("Every figure below is from the sections of this run (peers, streaming, orchestration), each a ratio to its baseline measured interleaved in the same run. Portkey has no target: it is the peer a user would otherwise put in front of an agent.\n\n")
	p("| target | figure | goal | verdict | what bounds it when missed |\n|---|---:|---|---|---|\n")
	for _, g := range goals() {
		v, shown, ok := g.value(r)
		if !ok {
			p("| %s | — | %s | not measured in this run | |\n", g.what, g.target)
			continue
		}
		verdict, bound := "met", ""
		switch {
		case g.met == nil:
			verdict = "(reference)"
		case !g.met(v):
			verdict, bound = "**missed**", g.bound
		}
		p("| %s | %s | %s | %s | %s |\n", g.what, shown, g.target, verdict, bound)
	}
	p("\n")
	return b.String()
}

func goals() []goal {
	peer := func(size, target string) func(*Results) (*PeerRow, *PeerRow, bool) {
		return func(r *Results) (*PeerRow, *PeerRow, bool) {
			if r.Peers == nil {
				return nil, nil, false
			}
			var t, rp *PeerRow
			for i := range r.Peers.Rows {
				x := &r.Peers.Rows[i]
				if x.Size != size {
					continue
				}
				switch x.Target {
				case target:
					t = x
				case tProxy:
					rp = x
				}
			}
			return t, rp, t != nil && rp != nil
		}
	}
	times := func(v float64) string { return fmt.Sprintf("%.2f×", v) }
	cpu := func(size, target string) func(*Results) (float64, string, bool) {
		return func(r *Results) (float64, string, bool) {
			t, rp, ok := peer(size, target)(r)
			if !ok || rp.AddedCPU <= 0 {
				return 0, "", false
			}
			v := t.AddedCPU / rp.AddedCPU
			return v, fmt.Sprintf("%s (%.0f vs %.0f µs)", times(v), t.AddedCPU, rp.AddedCPU), true
		}
	}
	rps := func(size, target string) func(*Results) (float64, string, bool) {
		return func(r *Results) (float64, string, bool) {
			t, rp, ok := peer(size, target)(r)
			if !ok || rp.Closed.RPS <= 0 {
				return 0, "", false
			}
			v := 100 * t.Closed.RPS / rp.Closed.RPS
			shown := fmt.Sprintf("%.0f%%", v)
			// The spread over the rounds: each of the target's windows over
			// the proxy's window of the same round.
			if n := min(len(t.RoundRPS), len(rp.RoundRPS)); n > 1 {
				lo, hi := math.Inf(1), math.Inf(-1)
				for i := range n {
					x := 100 * t.RoundRPS[i] / rp.RoundRPS[i]
					lo, hi = math.Min(lo, x), math.Max(hi, x)
				}
				shown += fmt.Sprintf(" (rounds %.0f–%.0f%%)", lo, hi)
			}
			return v, shown, true
		}
	}
	p50 := func(size, target string) func(*Results) (float64, string, bool) {
		return func(r *Results) (float64, string, bool) {
			t, rp, ok := peer(size, target)(r)
			if !ok || rp.Added.P50 <= 0 {
				return 0, "", false
			}
			v := t.Added.P50 / rp.Added.P50
			return v, fmt.Sprintf("%s (%.0f vs %.0f µs)", times(v), t.Added.P50, rp.Added.P50), true
		}
	}
	translateCPU := func(size string) func(*Results) (float64, string, bool) {
		return func(r *Results) (float64, string, bool) {
			tr, _, ok1 := peer(size, tTranslate)(r)
			rl, _, ok2 := peer(size, tRelay)(r)
			if !ok1 || !ok2 || rl.AddedCPU <= 0 {
				return 0, "", false
			}
			v := tr.AddedCPU / rl.AddedCPU
			return v, fmt.Sprintf("%s (%.0f vs %.0f µs)", times(v), tr.AddedCPU, rl.AddedCPU), true
		}
	}
	stream := func(target string, gap bool) func(*Results) (float64, string, bool) {
		return func(r *Results) (float64, string, bool) {
			for _, s := range r.Streaming {
				if s.Target == target && s.Versus != "" {
					v := s.TTFTRatio
					if gap {
						v = s.GapRatio
					}
					return v, times(v), v > 0
				}
			}
			return 0, "", false
		}
	}
	orch := func(n int) func(*Results) (float64, string, bool) {
		return func(r *Results) (float64, string, bool) {
			var t, e float64
			for _, o := range r.Orchestration {
				if o.Rollouts != n {
					continue
				}
				switch o.System {
				case "temporal":
					t = o.WallSeconds
				case "errgroup":
					e = o.WallSeconds
				}
			}
			if t <= 0 || e <= 0 {
				return 0, "", false
			}
			return t / e, fmt.Sprintf("%s (%.2f vs %.2f s)", times(t/e), t, e), true
		}
	}
	atMost := func(x float64) func(float64) bool { return func(v float64) bool { return v <= x } }
	atLeast := func(x float64) func(float64) bool { return func(v float64) bool { return v >= x } }
	const held = "The relay is store-and-forward where the proxy is cut-through: it reads the whole request to set the run's model on it, and the whole answer before writing any of it, so that a provider breaking off is answered with a well-formed error; "
	return []goal{
		{what: "relay 4 KB: added CPU per call ÷ reverse proxy", target: "≤ 1.2×", value: cpu("4KB", tRelay), met: atMost(1.2),
			bound: "the check of the request (overlay) and the parse of both bodies for the trace, which the proxy does not do."},
		{what: "relay 4 KB: req/s, 64 clients, % of reverse proxy", target: "≥ 90%", value: rps("4KB", tRelay), met: atLeast(90),
			bound: "CPU per call: both cores are busy at 64 clients, so req/s is CPU per call inverted."},
		{what: "relay 64 KB: added CPU per call ÷ reverse proxy", target: "≤ 1.2×", value: cpu("64KB", tRelay), met: atMost(1.2),
			bound: held + "both 64 KB bodies are kept for the trace and parsed (about 30 µs a call in a CPU profile of the relay's windows), the request's syntax is checked (about 15 µs) and it is read into memory (about 25 µs); the proxy keeps nothing and looks at no byte."},
		{what: "relay 64 KB: req/s, 64 clients, % of reverse proxy", target: "≥ 90%", value: rps("64KB", tRelay), met: atLeast(90),
			bound: "CPU per call (the row above): both cores are busy at 64 clients, so req/s is CPU per call inverted."},
		{what: "relay 64 KB: added p50 ÷ reverse proxy", target: "≤ 1.1×", value: p50("64KB", tRelay), met: atMost(1.1),
			bound: held + "the proxy's first answer bytes leave while the rest arrives."},
		{what: "translate (chat → Anthropic) 4 KB JSON: added CPU per call ÷ relay", target: "≤ 1.3×", value: translateCPU("4KB"), met: atMost(1.3),
			bound: "decoding both bodies into the typed form and encoding them in the other dialect."},
		{what: "translate (chat → Anthropic) 64 KB JSON: added CPU per call ÷ relay", target: "≤ 1.3×", value: translateCPU("64KB"), met: atMost(1.3),
			bound: "a translated call decodes both 64 KB bodies and encodes them again in the other dialect (escaping every byte of the content); the relay sends the caller's bytes and parses them once, for the trace."},
		{what: "translate stream (chat caller, Anthropic upstream): TTFT p99 ÷ relay", target: "≤ 1.2×", value: stream(tTranslate, false), met: atMost(1.2),
			bound: "the translated request is encoded anew, and the caller's first event is written after the upstream's message_start."},
		{what: "translate stream (chat caller, Anthropic upstream): event gap p99 ÷ relay", target: "≤ 1.2×", value: stream(tTranslate, true), met: atMost(1.2),
			bound: "each event is decoded and encoded again."},
		{what: "translate stream (Anthropic caller, chat upstream): TTFT p99 ÷ relay", target: "≤ 1.2×", value: stream(tTranslateAnthropic, false), met: atMost(1.2),
			bound: "the translated request is encoded anew, and message_start and content_block_start are written before the first delta."},
		{what: "translate stream (Anthropic caller, chat upstream): event gap p99 ÷ relay", target: "≤ 1.2×", value: stream(tTranslateAnthropic, true), met: atMost(1.2),
			bound: "each event is decoded and encoded again."},
		{what: "Portkey 4 KB: added CPU per call ÷ reverse proxy", target: "—", value: cpu("4KB", tPortkey)},
		{what: "Portkey 4 KB: req/s, 64 clients, % of reverse proxy", target: "—", value: rps("4KB", tPortkey)},
		{what: "Portkey 64 KB: added CPU per call ÷ reverse proxy", target: "—", value: cpu("64KB", tPortkey)},
		{what: "Portkey 64 KB: added p50 ÷ reverse proxy", target: "—", value: p50("64KB", tPortkey)},
		{what: "orchestration, 1,000 no-op rollouts: Temporal ÷ errgroup", target: "≤ 2×", value: orch(1000), met: atMost(2),
			bound: "two activities a rollout through the server (Acquire, which holds its slot until Run starts, and Run; a loopback slot skips Expose), each a task queue round trip, and the workflow tasks that schedule them and take their results, against function calls."},
		{what: "orchestration, 128 no-op rollouts: Temporal ÷ errgroup", target: "≤ 2.5×", value: orch(128), met: atMost(2.5),
			bound: "the run's start and its first workflow tasks, which a short run does not amortize."},
	}
}
