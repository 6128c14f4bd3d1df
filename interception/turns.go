package interception

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception/sidecar"
	"github.com/evalflow/evalflow/internal/prices"
	"github.com/evalflow/evalflow/trace"
)

// entry is a registered rollout and the turns recorded for it.
type entry struct {
	rollout Rollout
	secret  []byte

	mu    sync.Mutex
	turns []trace.Turn // in Index order
	// unparsed holds, by turn index, the raw bytes of relayed turns whose
	// typed Request and Response are not parsed yet (see materialize).
	unparsed map[int]rawTurn
	begun    int // turns started, recorded or not
	// delivered counts calls whose caller has the whole answer but whose
	// turn is not recorded yet: the relay flushes an answer's last byte
	// before it records the turn.
	delivered int
	// settled are closed when delivered falls to 0.
	settled []chan struct{}
	// failing is set while the rollout's last recorded call failed upstream.
	failing bool
	// used is what its calls have used of its limits (limits.go).
	used usage
	// idempotencyKeys are the Idempotency-Key headers of its calls so far.
	idempotencyKeys map[string]struct{}
	// side is what its tool servers and user share (package sidecar).
	side sidecar.State
	// waiting holds, by turn index, the calls sent to the upstream and not
	// recorded yet, as they were when sent: a harness stopped at its
	// timeout leaves its last call waiting on the provider, and Finish
	// reports it (unanswered) even before its recorder notices.
	waiting map[int]trace.Turn
	// sampled are the answered turns of a token-in rollout, which its
	// later calls may extend (tokenin.go); textNoted is set once a call of
	// it went as text for a reason worth logging.
	sampled   []sampled
	textNoted bool
}

// begin numbers a turn when its call arrives, so turns keep the order of
// the calls even when an earlier one finishes later, and tells whether
// the call, of headers h, retries an earlier one.
//
// A call retries an earlier one when its SDK says so (OpenAI's and
// Anthropic's number their tries in X-Stainless-Retry-Count, from 0;
// others repeat a try's Idempotency-Key), or when the rollout's last call
// failed upstream after all its attempts. Such a call gets one upstream
// attempt instead of Relay's MaxAttempts, so that retries add up instead
// of multiplying: a provider that keeps failing is called at most
// MaxAttempts times for a rollout's first failing call and once for every
// further call until one succeeds. With an SDK's default two retries that
// is 4 + 2 = 6 calls per model call, not 4 × 3 = 12.
func (e *entry) begin(h http.Header) (index int, retry bool) {
	retry = isSDKRetry(h)
	var key string
	if v := h["Idempotency-Key"]; len(v) > 0 {
		key = v[0]
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.begun++
	if key != "" {
		if _, seen := e.idempotencyKeys[key]; seen {
			retry = true
		} else {
			if e.idempotencyKeys == nil {
				e.idempotencyKeys = make(map[string]struct{})
			}
			e.idempotencyKeys[key] = struct{}{}
		}
	}
	return e.begun - 1, retry || e.failing
}

// isSDKRetry reports whether a Stainless SDK (OpenAI's, Anthropic's) says
// the call is a retry: X-Stainless-Retry-Count above 0.
func isSDKRetry(h http.Header) bool {
	v := h["X-Stainless-Retry-Count"]
	if len(v) == 0 {
		return false
	}
	n, err := strconv.Atoi(v[0])
	return err == nil && n > 0
}

// deliver notes that a call's caller has its whole answer; the call's
// record must pass wasDelivered.
func (e *entry) deliver() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.delivered++
}

// record keeps turn t, numbered index by begin, in index order, with the
// raw bytes of its typed fields when raw is not nil. wasDelivered says
// whether the call called deliver.
func (e *entry) record(index int, t trace.Turn, raw *rawTurn, wasDelivered bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t.Index = index
	delete(e.waiting, index)
	switch {
	case t.UpstreamFailure != "":
		e.failing = true
	case t.Attempts > 0 && t.Status != statusClientClosed:
		e.failing = false // the upstream answered
	}
	if t.Limit == "" {
		seq := t.Response.Usage.InputTokens + t.Response.Usage.OutputTokens
		e.used.tokens += seq
		e.used.seqLen = max(e.used.seqLen, seq)
		e.used.modelTime += t.Latency
		// A relayed answer not parsed yet has no usage here: it is priced
		// when parsed (materialize), up front when a cost limit needs it.
		t = priced(t, e.rollout)
		if t.CostUSD != nil {
			e.used.cost += *t.CostUSD
		}
	}
	i := len(e.turns)
	for i > 0 && e.turns[i-1].Index > index {
		i--
	}
	e.turns = slices.Insert(e.turns, i, t)
	if raw != nil {
		if e.unparsed == nil {
			e.unparsed = make(map[int]rawTurn)
		}
		e.unparsed[index] = *raw
	}
	if wasDelivered {
		e.delivered--
		if e.delivered == 0 {
			for _, c := range e.settled {
				close(c)
			}
			e.settled = nil
		}
	}
}

// settleTimeout bounds how long Finish and Turns wait for calls still
// recording. A call whose caller has its answer records its turn within
// milliseconds; the bound is generous so that a machine under load (two
// cores, hundreds of rollouts, the race detector) never loses a turn to
// it, and only a recorder that never returns is cut off.
const settleTimeout = 30 * time.Second

// settle waits, at most d, until every call whose caller has its answer has
// recorded its turn, so that a harness that is done finds all its turns.
// Calls still answering are not waited for.
func (e *entry) settle(d time.Duration) {
	e.mu.Lock()
	if e.delivered == 0 {
		e.mu.Unlock()
		return
	}
	c := make(chan struct{})
	e.settled = append(e.settled, c)
	e.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c:
	case <-t.C:
	}
}

// rawTurn is what a relayed turn keeps instead of its typed Request and
// Response until someone reads it: parsing is left off the relay's hot path
// (issue 6), and most turns are read once, when their rollout ends.
type rawTurn struct {
	dialect dialects.Dialect
	// request is the caller's body, before the overlay.
	request []byte
	// answered is set for a non-streaming answer relayed whole: status and
	// answer are the upstream's.
	answered bool
	status   int
	answer   []byte
}

// materialize fills t's typed fields from raw as the translate arm records
// them up front: the request as the upstream saw it (with r's model and
// sampling), and the answer or its error. A request that does not parse
// leaves an error prefixed "trace: ", and t is still returned.
func materialize(t trace.Turn, raw rawTurn, r Rollout) trace.Turn {
	if raw.answered {
		recordJSON(&t, raw.dialect, raw.status, raw.answer)
		if t.Error == "" {
			t.Tokens = answerTokens(r, raw.dialect, raw.answer)
		}
	}
	req, err := raw.dialect.ParseRequest(raw.request)
	if err != nil {
		msg := "trace: parse request: " + err.Error()
		if t.Error != "" {
			msg += "; " + t.Error
		}
		t.Error = msg
		return t
	}
	t.Request = overlaid(req, r)
	t.Streamed = req.Stream
	return priced(t, r)
}

// priced sets the turn's cost from its usage at the price of the model that
// answered, else the one asked for; a turn without usage, or whose model
// has no price, keeps none.
func priced(t trace.Turn, r Rollout) trace.Turn {
	return Priced(t, r.prices, r.Model, t.Request.Model)
}

// Priced is t with its cost (CostUSD) from the usage its provider reported,
// at table's price of the model that answered, else of the first of asked
// the table knows. A turn that has a cost, or reported no usage (a call
// that failed), is returned as it is, as is one of a model without a price
// (trace.Turn.Unpriced). Judge and simulated-user calls are priced by the
// same rule as the harness's.
func Priced(t trace.Turn, table prices.Table, asked ...string) trace.Turn {
	u := t.Response.Usage
	if t.CostUSD != nil || u.InputTokens+u.OutputTokens == 0 {
		return t
	}
	if usd, ok := table.Cost(u, append([]string{t.Response.Model}, asked...)...); ok {
		t.CostUSD = &usd
	}
	return t
}

// recordJSON parses a non-streaming answer into the turn.
func recordJSON(turn *trace.Turn, d dialects.Dialect, status int, body []byte) {
	if status < 200 || status > 299 {
		turn.Error = d.ParseError(status, body).Error()
		return
	}
	resp, err := d.ParseResponse(body)
	if err != nil {
		turn.Error = err.Error()
		if !json.Valid(body) {
			turn.UpstreamFailure = trace.UpstreamBadAnswer
		}
		return
	}
	turn.Response = resp
}

// overlaid is the request as the upstream saw it.
func overlaid(req dialects.Request, r Rollout) dialects.Request {
	if r.Model != "" {
		req.Model = r.Model
	}
	s := r.Sampling
	if s.Temperature != nil {
		req.Sampling.Temperature = s.Temperature
	}
	if s.TopP != nil {
		req.Sampling.TopP = s.TopP
	}
	if s.MaxTokens != nil {
		req.Sampling.MaxTokens = s.MaxTokens
	}
	if s.Seed != nil {
		req.Sampling.Seed = s.Seed
	}
	return req
}

// unparsedTurn is a turn of a copy to materialize: at is its position in
// the copy.
type unparsedTurn struct {
	at  int
	raw rawTurn
}

// sending notes that the call numbered index goes to the upstream now, as
// t; record ends the wait.
func (e *entry) sending(index int, t trace.Turn) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.waiting == nil {
		e.waiting = make(map[int]trace.Turn)
	}
	t.Index = index
	e.waiting[index] = t
}

// unanswered are the calls still waiting on the upstream, as turns the
// caller never had an answer to (statusClientClosed), in index order.
func (e *entry) unanswered() []trace.Turn {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []trace.Turn
	for _, t := range e.waiting {
		t.Status, t.Error = statusClientClosed, errNoAnswer
		t.Latency = time.Since(t.StartedAt)
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b trace.Turn) int { return a.Index - b.Index })
	return out
}

// errNoAnswer is the error of a call that had no answer from the upstream
// when its rollout's calls ended.
const errNoAnswer = "no answer from the model provider when the harness ended"

// snapshot returns a copy of the turns, every one materialized.
func (e *entry) snapshot() []trace.Turn {
	e.mu.Lock()
	turns := slices.Clone(e.turns)
	todo := e.unparsedIn(turns)
	e.mu.Unlock()
	e.fill(turns, todo)
	return turns
}

// turn returns the recorded turn numbered index, materialized.
func (e *entry) turn(index int) trace.Turn {
	e.mu.Lock()
	i, _ := e.find(index)
	turns := []trace.Turn{e.turns[i]}
	todo := e.unparsedIn(turns)
	e.mu.Unlock()
	e.fill(turns, todo)
	return turns[0]
}

// find is the position of the turn numbered index in e.turns; e.mu is held.
func (e *entry) find(index int) (int, bool) {
	return slices.BinarySearchFunc(e.turns, index, func(t trace.Turn, index int) int { return t.Index - index })
}

// unparsedIn lists the turns of a copy of e.turns still to materialize;
// e.mu is held.
func (e *entry) unparsedIn(turns []trace.Turn) []unparsedTurn {
	if len(e.unparsed) == 0 {
		return nil
	}
	var todo []unparsedTurn
	for i, t := range turns {
		if raw, ok := e.unparsed[t.Index]; ok {
			todo = append(todo, unparsedTurn{at: i, raw: raw})
		}
	}
	return todo
}

// fill materializes the turns todo of the copy turns without holding e.mu,
// so that calls recording turns meanwhile are not held up, then keeps the
// results in place of the raw bytes. Two readers may race to parse the same
// turn: both results are alike, and the first one kept wins.
func (e *entry) fill(turns []trace.Turn, todo []unparsedTurn) {
	if len(todo) == 0 {
		return
	}
	for _, u := range todo {
		turns[u.at] = materialize(turns[u.at], u.raw, e.rollout)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, u := range todo {
		t := turns[u.at]
		if _, ok := e.unparsed[t.Index]; !ok {
			continue // another reader kept its result
		}
		delete(e.unparsed, t.Index)
		if i, ok := e.find(t.Index); ok {
			e.turns[i] = t
		}
	}
	if len(e.unparsed) == 0 {
		e.unparsed = nil // a map keeps its buckets after deletes
	}
}
