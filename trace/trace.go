// Package trace defines what evalflow records about a rollout: every model turn
// the interception server saw, and how the harness process ended.
package trace

import (
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
	// Status is the HTTP status returned to the harness.
	Status int    `json:"status"`
	Error  string `json:"error,omitempty"`
	// Attempts counts upstream attempts (retries before the first byte).
	Attempts  int           `json:"attempts"`
	StartedAt time.Time     `json:"started_at"`
	Latency   time.Duration `json:"latency_ns"`
	// TTFT is the time to the first byte of the upstream response body.
	TTFT time.Duration `json:"ttft_ns"`
}

// Harness is how the harness process ended.
type Harness struct {
	ExitCode int           `json:"exit_code"`
	TimedOut bool          `json:"timed_out,omitempty"`
	Stdout   string        `json:"stdout_tail,omitempty"`
	Stderr   string        `json:"stderr_tail,omitempty"`
	Answer   string        `json:"answer,omitempty"`
	Duration time.Duration `json:"duration_ns"`
}

// Rollout is the full trace of one rollout, stored by the run store.
type Rollout struct {
	Key       string    `json:"key"`
	TaskID    string    `json:"task_id"`
	Turns     []Turn    `json:"turns"`
	Harness   Harness   `json:"harness"`
	Reward    float64   `json:"reward"`
	Score     string    `json:"score_detail,omitempty"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
}
