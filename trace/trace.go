// Package trace defines what evalflow records about a rollout: every model turn
// the interception server saw, and how the harness process ended.
package trace

import (
	"encoding/json"
	"time"

	"github.com/evalflow/evalflow/dialects"
)

// Turn is one model call made by a harness through the interception server.
type Turn struct {
	Index    int               `json:"index"`
	Dialect  string            `json:"dialect"`
	Route    string            `json:"route"`
	Streamed bool              `json:"streamed"`
	Request  dialects.Request  `json:"request"`
	Response dialects.Response `json:"response"`
	// Tokens is the call's token-level data (prompt and completion token
	// ids, log probabilities), recorded when the run traces tokens and the
	// upstream returned them.
	Tokens *dialects.Tokens `json:"tokens,omitempty"`
	// TokenIn says the call's prompt went to the upstream as token ids
	// (the previous turn's prompt and completion ids and the new messages'
	// tokens), not as text the server tokenized again (--token-in).
	TokenIn bool `json:"token_in,omitempty"`
	// TokenInBridge names how a token-in prompt extends the earlier turn:
	// the model family's chat template that placed the new messages after
	// it (qwen3, llama3.1, deepseek-v3), or "prefix" where the template's
	// render of the call began with its render of the earlier turn.
	TokenInBridge string `json:"token_in_bridge,omitempty"`
	// TokenInClosed says the earlier turn was cut at max_tokens: its
	// family's end token was added to the prompt after it, not sampled.
	TokenInClosed bool `json:"token_in_closed,omitempty"`
	// TokenInText says why a call of a token-in rollout went as text.
	TokenInText string `json:"token_in_text,omitempty"`
	// PolicyVersion is the version of the policy (the weights) that
	// answered the call: what the upstream reported, or else what the
	// trainer had announced when the rollout started. Absent: unknown.
	PolicyVersion *int64 `json:"policy_version,omitempty"`
	// Status is the HTTP status returned to the harness.
	Status int    `json:"status"`
	Error  string `json:"error,omitempty"`
	// UpstreamFailure says how the model provider failed the call, when it
	// did: the turn failed for the infrastructure, not for the agent.
	UpstreamFailure UpstreamFailure `json:"upstream_failure,omitempty"`
	// Provider names the provider that answered, when the run's role
	// named providers (--role); FallbackFrom the ones that failed the call
	// before it, in the order they were tried.
	Provider     string   `json:"provider,omitempty"`
	FallbackFrom []string `json:"fallback_from,omitempty"`
	// Attempts counts upstream attempts (retries before the first byte).
	Attempts int `json:"attempts"`
	// CallerRetry is set on a call made again by its caller after a failed
	// one (its SDK said so, or the rollout's previous call failed upstream):
	// the upstream got a single attempt at it, so that the caller's retries
	// and the interception's do not multiply.
	CallerRetry bool `json:"caller_retry,omitempty"`
	// Limit names the rollout's limit that refused the call (LimitTurns,
	// LimitTokens, LimitModelTime, LimitCost, …): it was answered with an error without
	// reaching the upstream, and the rollout ends as that limit.
	Limit string `json:"limit,omitempty"`
	// CostUSD is what the call cost, from the usage its provider reported
	// (Response.Usage) at the worker's price of the model; absent when the
	// call reported no usage or the model has no price (Unpriced says
	// whether the cost is unknown rather than nothing).
	CostUSD   *float64      `json:"cost_usd,omitempty"`
	StartedAt time.Time     `json:"started_at"`
	Latency   time.Duration `json:"latency_ns"`
	// TTFT is the time to the first byte of the upstream response body.
	TTFT time.Duration `json:"ttft_ns"`
}

// Unpriced says the call's cost is unknown, not 0: it reported usage but
// its model has no price, or it was answered (200, no error) without any
// usage (a chat stream whose caller did not ask for stream_options'
// include_usage).
func (t Turn) Unpriced() bool {
	if t.CostUSD != nil || t.Limit != "" {
		return false
	}
	u := t.Response.Usage
	return u.InputTokens+u.OutputTokens > 0 || t.Status == 200 && t.Error == ""
}

// Cost sums the cost of turns and counts those whose cost is unknown
// (Turn.Unpriced).
func Cost(turns []Turn) (usd float64, unpriced int) {
	for _, t := range turns {
		if t.CostUSD != nil {
			usd += *t.CostUSD
		} else if t.Unpriced() {
			unpriced++
		}
	}
	return usd, unpriced
}

// UpstreamFailure is how a model provider failed a call.
type UpstreamFailure string

// How a provider fails. Each is retried while no byte of the answer has
// reached the harness; a turn records the failure that ended its call.
const (
	// UpstreamStatus: a 429 or a 5xx.
	UpstreamStatus UpstreamFailure = "status"
	// UpstreamConnection: the connection could not be made, or broke (cut
	// or reset) before the answer was whole.
	UpstreamConnection UpstreamFailure = "connection"
	// UpstreamTimeout: no headers within the response header timeout, or
	// no byte of the answer for the stream idle timeout.
	UpstreamTimeout UpstreamFailure = "timeout"
	// UpstreamTruncated: an event stream that ended before its terminal
	// event.
	UpstreamTruncated UpstreamFailure = "truncated"
	// UpstreamBadAnswer: a 2xx answer that is not valid JSON, or that the
	// caller's dialect cannot be made of.
	UpstreamBadAnswer UpstreamFailure = "bad_answer"
	// UpstreamErrorEvent: an event stream that reported a server-side error
	// (overloaded, rate limited, internal) in place of its answer.
	UpstreamErrorEvent UpstreamFailure = "error_event"
)

// The limits a rollout's calls may reach, as Turn.Limit names them.
const (
	// LimitTurns: the rollout made its most model calls.
	LimitTurns = "turns"
	// LimitTokens: its calls used its most tokens, prompt and completion.
	LimitTokens = "tokens"
	// LimitModelTime: its calls took its most time, summed.
	LimitModelTime = "model_time"
	// LimitSeqLen: one of its calls reached the most tokens, prompt and
	// completion, of a call (the gateway's max_seq_len).
	LimitSeqLen = "seq_len"
	// LimitCost: its calls cost its most USD (--max-cost).
	LimitCost = "cost"
)

// Harness is how the harness process ended.
type Harness struct {
	ExitCode int           `json:"exit_code"`
	TimedOut bool          `json:"timed_out,omitempty"`
	Stdout   string        `json:"stdout_tail,omitempty"`
	Stderr   string        `json:"stderr_tail,omitempty"`
	Answer   string        `json:"answer,omitempty"`
	Duration time.Duration `json:"duration_ns"`
	// SessionLogs are the harness's own session logs and transcripts
	// (codex's rollout files, claude-code's project transcripts).
	SessionLogs []SessionLog `json:"session_logs,omitempty"`
}

// SessionLog is one log or transcript file a harness left.
type SessionLog struct {
	Name      string `json:"name"`
	Content   string `json:"content"`
	Truncated bool   `json:"truncated,omitempty"`
}

// Verifier is how a task's verifier ran after the agent.
type Verifier struct {
	ExitCode int `json:"exit_code"`
	// Error says why the verifier gave no valid reward (it hung, crashed
	// or wrote garbage); empty when it did.
	Error   string             `json:"error,omitempty"`
	Reward  float64            `json:"reward"`
	Metrics map[string]float64 `json:"metrics,omitempty"`
	Stdout  string             `json:"stdout_tail,omitempty"`
	Stderr  string             `json:"stderr_tail,omitempty"`
	// Duration is the verifier's run; Timeout the limit it ran under.
	Duration time.Duration `json:"duration_ns"`
	Timeout  time.Duration `json:"timeout_ns,omitempty"`
}

// Rollout is the full trace of one rollout, stored by the run store.
type Rollout struct {
	Key    string `json:"key"`
	TaskID string `json:"task_id"`
	Turns  []Turn `json:"turns"`
	// Judge holds the calls a judge rubric made to grade the rollout, apart
	// from the agent's own turns.
	Judge   []Turn  `json:"judge_turns,omitempty"`
	Harness Harness `json:"harness"`
	Reward  float64 `json:"reward"`
	Score   string  `json:"score_detail,omitempty"`
	// Workspace notes what preparing the task's workspace could not
	// reproduce outside Docker, and what of the task's definition evalflow
	// does not carry out (tasksets.Task.Warnings); absent when nothing is.
	Workspace []string `json:"workspace_notes,omitempty"`
	// Verifier is how the task's verifier ran; nil for a task without one.
	// For a multi-step task it is the last step's that ran.
	Verifier *Verifier `json:"verifier,omitempty"`
	// Steps are a multi-step task's steps that ran, in order; absent for
	// a task of one step.
	Steps []Step `json:"steps,omitempty"`
	// State is the rollout's shared state (/state) at the end, as its tool
	// servers and user left it; absent when nothing wrote it.
	State json.RawMessage `json:"state,omitempty"`
	// Users are the turns of the task's simulated user, in order.
	Users []UserTurn `json:"user_turns,omitempty"`
	// Artifacts are the files the agent and the verifier left under
	// /logs/artifacts, in path order; past the attempt's limits a file is
	// listed without its content. ArtifactsUnlisted counts the files past
	// the most the listing holds.
	Artifacts         []Artifact `json:"artifacts,omitempty"`
	ArtifactsUnlisted int        `json:"artifacts_unlisted,omitempty"`

	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
}

// Step is one step of a multi-step task: how its agent and verifier went.
type Step struct {
	Name string `json:"name"`
	// Turns is how many of the rollout's turns were made by the end of
	// this step's agent.
	Turns    int      `json:"turns"`
	Verifier Verifier `json:"verifier"`
	// Uncounted is a step whose verdict gates the next but is not part
	// of the rollout's reward (contributes_to_reward = false).
	Uncounted bool `json:"uncounted,omitempty"`
	// Stopped is set on a step whose verdict fell below its min_reward:
	// the rollout ended after it.
	Stopped bool `json:"stopped,omitempty"`
}

// UserTurn is one turn of a task's simulated user: its reply to the
// agent's answer before it.
type UserTurn struct {
	// Index numbers the user's turns from 1.
	Index int `json:"index"`
	// AfterTurn is how many model calls the agent had made before it.
	AfterTurn int    `json:"after_turn"`
	Content   string `json:"content"`
	// Done is set on the turn that ended the conversation.
	Done bool      `json:"done,omitempty"`
	At   time.Time `json:"at"`
	// Call is the model call of a persona user; nil for a user command.
	Call *Turn `json:"call,omitempty"`
}
