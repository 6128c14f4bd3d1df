package results

import (
	"time"
)

// Record is one rollout's result: one line of runs/<run-id>/rollouts.jsonl.
type Record struct {
	// Key is the rollout's stable key, run/epoch/index/k (rollout.Key).
	Key    string  `json:"key"`
	RunID  string  `json:"run_id"`
	Epoch  int     `json:"epoch"`
	Index  int64   `json:"index"`
	K      int     `json:"k"`
	TaskID string  `json:"task_id"`
	Reward float64 `json:"reward"`
	// Metrics are the rubric's named numbers behind Reward: one per part of
	// the rubric ("tests", "judge", …) and the numbers a part reports under
	// its name ("tests.passed"). Absent when the rubric gave none.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Status is rollout.StatusOK or rollout.StatusError.
	Status string `json:"status"`
	// ErrorKind classifies an error: harness_exit, timeout, context_length, ...
	ErrorKind    string `json:"error_kind,omitempty"`
	Error        string `json:"error,omitempty"`
	Turns        int    `json:"turns"`
	InputTokens  int    `json:"input_tokens"`
	OutputTokens int    `json:"output_tokens"`
	DurationMS   int64  `json:"duration_ms"`
	// CostUSD is what the rollout's model calls cost at the worker's
	// prices; UnpricedTurns counts calls whose cost is unknown (a model
	// without a price, an answer without usage: trace.Turn.Unpriced).
	CostUSD       float64 `json:"cost_usd,omitempty"`
	UnpricedTurns int     `json:"unpriced_turns,omitempty"`
	// Model is the model that answered: as the provider named it in its last
	// response, else the model the run asked for.
	Model string `json:"model,omitempty"`
	// Attempt numbers the attempt that made this record (Put may renumber a
	// resumed run's attempt past those already stored).
	Attempt int `json:"attempt"`
	// Trace names the record's attempt's trace in the store, relative to
	// the run (for Files, a file under the run's directory); Put sets it.
	Trace      string    `json:"trace"`
	FinishedAt time.Time `json:"finished_at"`
}
