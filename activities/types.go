package activities

import (
	"time"

	"github.com/evalflow/evalflow/dialects"
)

// Error types set on application errors at the activity boundary. The workflow
// decides what to retry by these names, so they are part of the history format.
const (
	// ErrSlotLost: the slot is not on this worker (it restarted); re-acquire.
	ErrSlotLost = "SlotLost"
	// ErrTunnel: exposing the interception server failed; retried.
	ErrTunnel = "TunnelError"
	// ErrUpstream: the model provider kept failing (429/5xx/connection).
	ErrUpstream = "UpstreamUnavailable"
	// ErrRuntime: the harness runtime failed (workdir, spawn); retried.
	ErrRuntime = "RuntimeError"
	// ErrConfig: the run cannot work as configured (unknown taskset, missing
	// harness command, bad rubric). Not retried; fails the run.
	ErrConfig = "ConfigError"
)

// Rollout statuses.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// Error kinds recorded for rollouts that ended with StatusError.
const (
	KindHarnessExit   = "harness_exit"
	KindTimeout       = "timeout"
	KindContextLength = "context_length"
	KindRefusal       = "refusal"
	KindMaxTurns      = "max_turns"
	KindInfra         = "infrastructure"
)

// HarnessConfig is how rollouts run their agent program.
type HarnessConfig struct {
	// Command is argv; empty means the built-in agent.
	Command  []string      `json:"command,omitempty"`
	Timeout  time.Duration `json:"timeout"`
	MaxTurns int           `json:"max_turns"`
	// Dialect is the protocol the built-in agent speaks: chat, responses or
	// anthropic; empty is chat. Other commands choose their own.
	Dialect string `json:"dialect,omitempty"`
}

// RolloutRef names one rollout and everything needed to run it. It holds no
// secret: secrets live only in the worker that acquired the slot.
type RolloutRef struct {
	RunID    string            `json:"run_id"`
	Epoch    int               `json:"epoch"`
	Index    int64             `json:"index"`
	K        int               `json:"k"`
	Taskset  string            `json:"taskset"`
	Model    string            `json:"model"`
	Sampling dialects.Sampling `json:"sampling"`
	Harness  HarnessConfig     `json:"harness"`
	Rubric   string            `json:"rubric"`
	// Attempt counts workflow-level attempts of this rollout, from 1.
	Attempt int `json:"attempt"`
	// RetryFailed reruns a rollout whose stored result is a failure; without
	// it any stored result is reused. Training runs set it so that a resumed
	// epoch reruns what failed.
	RetryFailed bool `json:"retry_failed,omitempty"`
}

// Key is the rollout's stable identity, run/epoch/index/k.
func (r RolloutRef) Key() string { return RolloutKey(r.RunID, r.Epoch, r.Index, r.K) }

// DescribeTasksetInput asks for a taskset's size.
type DescribeTasksetInput struct {
	Taskset string `json:"taskset"`
}

// DescribeTasksetResult is a taskset's size; Len is -1 for an infinite one.
type DescribeTasksetResult struct {
	Len int64 `json:"len"`
}

// AcquireInput reserves a rollout slot on some worker.
type AcquireInput struct {
	Rollout RolloutRef `json:"rollout"`
}

// AcquireResult says where the rollout's later steps must run, or that the
// rollout is already in the run store (Done) and nothing needs to run.
type AcquireResult struct {
	Done *Summary `json:"done,omitempty"`
	// HostQueue is the task queue only the acquiring worker polls.
	HostQueue string `json:"host_queue"`
	// Server numbers the interception server within that worker's pool.
	Server int `json:"server"`
}

// ExposeInput asks for the slot's server to be reachable by the harness.
type ExposeInput struct {
	Key string `json:"key"`
}

// ExposeResult is where the harness reaches the interception server.
type ExposeResult struct {
	BaseURL string `json:"base_url"`
}

// RunInput runs the harness for an acquired, exposed slot, scores and stores it.
type RunInput struct {
	Rollout RolloutRef `json:"rollout"`
	BaseURL string     `json:"base_url"`
}

// ReleaseInput frees a slot whose rollout will not run.
type ReleaseInput struct {
	Key string `json:"key"`
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
	// Reused is true when the store already held this rollout.
	Reused bool `json:"reused,omitempty"`
	// Trace is the rollout's trace file, relative to the run's directory.
	Trace string `json:"trace,omitempty"`
}

// ScoreGroupInput scores the rollouts of one task together.
type ScoreGroupInput struct {
	RunID   string `json:"run_id"`
	Epoch   int    `json:"epoch"`
	Index   int64  `json:"index"`
	Taskset string `json:"taskset"`
	Rubric  string `json:"rubric"`
	// Keys are the group's rollout keys, by k.
	Keys []string `json:"keys"`
}

// GroupSummary is a scored group as the workflow keeps it.
type GroupSummary struct {
	Key        string    `json:"key"`
	Mean       float64   `json:"mean"`
	Std        float64   `json:"std"`
	Advantages []float64 `json:"advantages"`
}

// FinishEpochInput records a finished epoch in the run store.
type FinishEpochInput struct {
	RunID  string `json:"run_id"`
	Epoch  int    `json:"epoch"`
	Result any    `json:"result"`
}

// InventoryInput asks what a run's store already holds.
type InventoryInput struct {
	RunID string `json:"run_id"`
}

// InventoryResult lists the epochs a run has finished, in order.
type InventoryResult struct {
	Epochs []int `json:"epochs"`
}

// FinishInput records a run's summary in the run store.
type FinishInput struct {
	RunID   string `json:"run_id"`
	Summary any    `json:"summary"`
}
