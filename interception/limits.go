package interception

import (
	"fmt"
	"net/http"
	"time"

	"github.com/evalflow/evalflow/trace"
)

// Limits bound a rollout's model calls. The interception server enforces
// them whatever the harness does: once one is reached, every further call
// of the rollout is answered with an error in the caller's dialect without
// reaching the upstream, and its turn records the limit (trace.Turn.Limit).
// Zero fields are no limit.
type Limits struct {
	// Turns is the most model calls. A caller's retry of a failed call
	// (see entry.begin) is not counted again.
	Turns int
	// Tokens is the most tokens, prompt and completion, of all calls
	// together. A call in flight when it is reached is answered: the
	// limit refuses the calls after it.
	Tokens int
	// ModelTime is the most time the calls take, summed from their arrival
	// to their answer; like Tokens, it refuses the calls after it.
	ModelTime time.Duration
	// SeqLen is the most tokens, prompt and completion, of one call: once
	// a call's reached it, the conversation cannot grow past it, and the
	// calls after it are refused. (The gateway also caps each call's max
	// tokens at it.)
	SeqLen int
	// CostUSD is the most USD the calls may cost together, at the server's
	// prices (Config.Prices); like Tokens, it refuses the calls after it.
	// Calls of a model without a price cost nothing against it.
	CostUSD float64
}

// statusLimit is the status of a call refused by a limit. It is a 400, the
// one status the SDKs (OpenAI's, Anthropic's, codex's, claude-code's) never
// retry: a 429 or 5xx would be tried again, each try refused alike, and
// the harness would back off for nothing before it gives up.
const statusLimit = http.StatusBadRequest

// codeLimit is the error code of a call refused by a limit, in dialects
// whose errors carry one.
const codeLimit = "rollout_limit_reached"

// usage is what a rollout's calls have used of its limits so far.
type usage struct {
	calls     int
	tokens    int
	modelTime time.Duration
	// seqLen is the most tokens, prompt and completion, of one call.
	seqLen int
	cost   float64
}

// reached says which of l the usage u has reached, and the message for
// the caller, or "".
func (l Limits) reached(u usage) (which, msg string) {
	switch {
	case l.Turns > 0 && u.calls >= l.Turns:
		return trace.LimitTurns, fmt.Sprintf("rollout limit reached: %d model calls (--max-turns %d)", u.calls, l.Turns)
	case l.Tokens > 0 && u.tokens >= l.Tokens:
		return trace.LimitTokens, fmt.Sprintf("rollout limit reached: %d tokens (--max-tokens-total %d)", u.tokens, l.Tokens)
	case l.ModelTime > 0 && u.modelTime >= l.ModelTime:
		return trace.LimitModelTime, fmt.Sprintf("rollout limit reached: %v of model calls (--max-model-time %v)",
			u.modelTime.Round(time.Millisecond), l.ModelTime)
	case l.SeqLen > 0 && u.seqLen >= l.SeqLen:
		return trace.LimitSeqLen, fmt.Sprintf("rollout limit reached: a call of %d tokens, prompt and completion (max_seq_len %d)",
			u.seqLen, l.SeqLen)
	case l.CostUSD > 0 && u.cost >= l.CostUSD:
		return trace.LimitCost, fmt.Sprintf("rollout limit reached: $%.4f of model calls (--max-cost %v)", u.cost, l.CostUSD)
	}
	return "", ""
}

// admit counts a call against the rollout's limits, or says which limit
// refuses it. A caller's retry passes the turn limit uncounted, so that a
// provider's failure costs the agent no turn; the other limits still hold.
func (e *entry) admit(retry bool) (which, msg string) {
	l := e.rollout.Limits
	e.mu.Lock()
	defer e.mu.Unlock()
	u := e.used
	if retry {
		u.calls = 0
	}
	if which, msg = l.reached(u); which != "" {
		return which, msg
	}
	if !retry {
		e.used.calls++
	}
	return "", ""
}

// unadmit gives back the turn a call was counted, when the call never
// reached the upstream: a body the interception refused itself (not JSON,
// no model) is not a model call and costs the agent no turn.
func (e *entry) unadmit() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.used.calls > 0 {
		e.used.calls--
	}
}

// refuse answers a call the rollout's limit which refuses, and records it.
func (c *recorder) refuse(which, msg string) {
	c.turn.Limit = which
	c.w.Header().Set("X-Should-Retry", "false") // Stainless SDKs honour it
	c.fail(statusLimit, codeLimit, msg)
}
