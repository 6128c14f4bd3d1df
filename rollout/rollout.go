// Package rollout is the contract between evalflow's workflows and its
// activities: what a rollout is (Ref, its Key), how it ended (Summary,
// statuses, error kinds), the error types activities fail with, and each
// activity's name, input and result. Workflows, the pull client and the run
// store import it; it imports only the standard library, so none of them
// links a transport, a tunnel or a subprocess runner through it.
package rollout

import (
	"encoding/json"
	"strconv"
	"time"
)

// Sampling is what a run sets on every model call; nil fields are left as
// the harness sent them.
type Sampling struct {
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	MaxTokens   *int     `json:"max_tokens,omitempty"`
	Seed        *int64   `json:"seed,omitempty"`
}

// HarnessConfig is how rollouts run their agent program.
type HarnessConfig struct {
	// Command is argv; empty means the built-in agent.
	Command []string      `json:"command,omitempty"`
	Timeout time.Duration `json:"timeout"`
	// MaxTurns is the most model calls of a rollout; the interception
	// server refuses the ones after it, whatever the harness (0: none).
	MaxTurns int `json:"max_turns"`
	// MaxTokensTotal is the most tokens, prompt and completion, of all a
	// rollout's model calls together (0: none).
	MaxTokensTotal int `json:"max_tokens_total,omitempty"`
	// MaxModelTime is the most time a rollout's model calls may take,
	// summed (0: none).
	MaxModelTime time.Duration `json:"max_model_time,omitempty"`
	// MaxCostUSD is the most a rollout's model calls may cost, in USD at
	// the worker's prices (0: none).
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	// TraceTokens asks OpenAI-compatible chat upstreams (vLLM, SGLang) for
	// token-level data, prompt and completion token ids and log
	// probabilities, and records it on every turn of the trace.
	TraceTokens bool `json:"trace_tokens,omitempty"`
	// TopLogprobs is how many alternatives per completion token a traced
	// turn keeps (0: none); with TraceTokens only.
	TopLogprobs int `json:"top_logprobs,omitempty"`
	// TokenIn sends a chat call that extends an earlier turn of the
	// rollout to the upstream with its prompt as token ids, that turn's
	// prompt and completion ids followed by the new messages' tokens, so
	// nothing the model sampled is re-tokenized (vLLM with prime-rl's
	// /v1/chat/completions/tokens route); other calls go as text. It
	// implies TraceTokens.
	TokenIn bool `json:"token_in,omitempty"`
	// Dialect is the protocol the built-in agent speaks: chat, responses or
	// anthropic; empty is chat. Other commands choose their own.
	Dialect string `json:"dialect,omitempty"`
	// Oracle runs each task's reference solution (solution/solve.sh) in
	// place of an agent, to check a taskset: every task should score 1.
	Oracle bool `json:"oracle,omitempty"`
	// Adversary runs one of the audit's fixed adversarial harnesses (the
	// built-in agent's, e.g. "write-reward") in place of an agent: it
	// tries to get the reward without doing the task, so anything above 0
	// marks a task, or a runtime, that can be won that way.
	Adversary string `json:"adversary,omitempty"`
	// VerifierTimeout, when set, overrides each task's own verifier timeout
	// (task.toml's [verifier] timeout_sec).
	VerifierTimeout time.Duration `json:"verifier_timeout,omitempty"`
	// TimeoutGiven says Timeout was set for the run (--harness-timeout):
	// it then overrides each task's own agent timeout (task.toml's [agent]
	// timeout_sec), which otherwise applies up to Timeout.
	TimeoutGiven bool `json:"timeout_given,omitempty"`
	// PolicyVersionHeader names a response header of the upstream that
	// carries the policy (weights) version that answered, an integer
	// (e.g. x-policy-version); each turn records it, else the version the
	// rollout was started on (Ref.PolicyVersion).
	PolicyVersionHeader string `json:"policy_version_header,omitempty"`
	// Env is KEY=VALUE entries added to every harness process's
	// environment (the starter's --harness-env). It is part of the run's
	// workflow input, so it holds no credential: workers refuse names that
	// look like one (harness.CheckRunEnv).
	Env []string `json:"env,omitempty"`
	// Roles name the providers, from the worker's, that the policy, the
	// judge and the simulated user call, with their fallbacks; empty roles
	// call the worker's default provider.
	Roles Roles `json:"roles,omitzero"`
}

// AgentTimeout is how long the agent of a task whose own limit is task (0:
// none) may run: the run's Timeout when it was given or the task has none,
// else the task's, up to the run's Timeout, which bounds the Run activity.
func (h HarnessConfig) AgentTimeout(task time.Duration) time.Duration {
	if h.TimeoutGiven || task <= 0 || task > h.Timeout {
		return h.Timeout
	}
	return task
}

// Ref names one rollout and everything needed to run it. It holds no
// secret: secrets live only in the worker that acquired the slot.
type Ref struct {
	RunID    string        `json:"run_id"`
	Epoch    int           `json:"epoch"`
	Index    int64         `json:"index"`
	K        int           `json:"k"`
	Taskset  string        `json:"taskset"`
	Model    string        `json:"model"`
	Sampling Sampling      `json:"sampling"`
	Harness  HarnessConfig `json:"harness"`
	Rubric   string        `json:"rubric"`
	// Attempt counts workflow-level attempts of this rollout, from 1.
	Attempt int `json:"attempt"`
	// RetryFailed reruns a rollout whose stored result is a failure; without
	// it any stored result is reused. Training runs set it so that a resumed
	// epoch reruns what failed.
	RetryFailed bool `json:"retry_failed,omitempty"`
	// PolicyVersion is the policy version a pull run's trainer had
	// announced when the rollout was scheduled; its turns record it unless
	// the upstream names its own (HarnessConfig.PolicyVersionHeader).
	PolicyVersion *int64 `json:"policy_version,omitempty"`
}

// Key is the rollout's stable identity, run/epoch/index/k.
func (r Ref) Key() string { return Key(r.RunID, r.Epoch, r.Index, r.K) }

// Key formats the stable key of rollout k of task index in epoch of a run:
// run/epoch/index/k. Results are idempotent on it.
func Key(runID string, epoch int, index int64, k int) string {
	return runID + "/" + strconv.Itoa(epoch) + "/" + strconv.FormatInt(index, 10) + "/" + strconv.Itoa(k)
}

// Summary is the small result of a rollout the workflow keeps: no trace, no
// text beyond a short error.
type Summary struct {
	Key          string  `json:"key"`
	Index        int64   `json:"index"`
	K            int     `json:"k"`
	Reward       float64 `json:"reward"`
	Status       string  `json:"status"`
	ErrorKind    string  `json:"error_kind,omitempty"`
	Error        string  `json:"error,omitempty"`
	Turns        int     `json:"turns"`
	InputTokens  int     `json:"input_tokens"`
	OutputTokens int     `json:"output_tokens"`
	DurationMS   int64   `json:"duration_ms"`
	// CostUSD is what the rollout's model calls cost; UnpricedTurns counts
	// the calls whose cost is unknown (a model without a price, an answer
	// without usage), not in CostUSD.
	CostUSD       float64 `json:"cost_usd,omitempty"`
	UnpricedTurns int     `json:"unpriced_turns,omitempty"`
	// Reused is true when the store already held this rollout.
	Reused bool `json:"reused,omitempty"`
	// Rerun is true when the store held a failure of this rollout and the
	// rollout ran again (Ref.RetryFailed).
	Rerun bool `json:"rerun,omitempty"`
	// Trace names the rollout's trace in the run store, relative to its run
	// (traces/<key>/attempt-<n>.json with either store); read it through
	// the store, never as a host path.
	Trace string `json:"trace,omitempty"`
	// Verify, set by Run, says the rollout is not finished: its workspace
	// waits on the worker for the task's verifier (ActivityVerify).
	Verify *VerifyPlan `json:"verify,omitempty"`
	// Tokens is the token-level data of the rollout's turns, when its run
	// traces tokens (HarnessConfig.TraceTokens) and the upstream returned
	// it: what a trainer pulling groups (pull.RunGroup) learns from.
	Tokens []TurnTokens `json:"tokens,omitempty"`
	// TokensCut says Tokens was left out because it was larger than
	// MaxSummaryTokenBytes; the trace holds it.
	TokensCut bool `json:"tokens_cut,omitempty"`
	// Truncated, set when the run traces tokens, says a limit of the
	// rollout refused a call, or a turn
	// stopped at its max tokens (finish reason length): the completion
	// was cut, not finished by the model.
	Truncated bool `json:"truncated,omitempty"`
	// PolicyVersion is the oldest policy version among the rollout's turns
	// (trace.Turn.PolicyVersion), when its run records versions.
	PolicyVersion *int64 `json:"policy_version,omitempty"`
	// OffPolicySteps is how many versions PolicyVersion is behind the pull
	// run's current version when the group was returned (0 when either is
	// unknown).
	OffPolicySteps int64 `json:"off_policy_steps,omitempty"`
	// Stale says OffPolicySteps is past the group's bound
	// (workflows.RunGroupInput.MaxOffPolicySteps) and the rollout was
	// returned as it is: asked to be marked, or still stale after
	// MaxStaleReruns reruns.
	Stale bool `json:"stale,omitempty"`
	// StaleReruns counts the rollouts run in this one's place because the
	// earlier ones were stale; Key names the last (workflows.RerunKey).
	StaleReruns int `json:"stale_reruns,omitempty"`
}

// TurnTokens is one model call's token-level data.
type TurnTokens struct {
	// Turn is the turn's index in the trace.
	Turn int `json:"turn"`
	// FinishReason is why the completion ended: stop, length, tool_calls.
	FinishReason string `json:"finish_reason,omitempty"`
	// TokenIn and PolicyVersion are the turn's (trace.Turn): its prompt
	// went in as token ids; the policy version that answered it.
	TokenIn       bool   `json:"token_in,omitempty"`
	PolicyVersion *int64 `json:"policy_version,omitempty"`
	// Data is the trace's record of the turn's tokens (trace.Turn.Tokens,
	// a dialects.Tokens): prompt_ids and completion_ids as base64 of
	// little-endian int32s, logprobs as base64 of little-endian float32s,
	// and top_k, top_tokens and top_logprobs when alternatives were asked.
	Data json.RawMessage `json:"data"`
}

// MaxSummaryTokenBytes bounds the token data a Summary carries through a
// workflow's history; a larger rollout's is read from its trace.
const MaxSummaryTokenBytes = 1 << 20
