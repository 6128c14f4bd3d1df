// Package atif writes a run's rollouts as trajectories in Harbor's Agent
// Trajectory Interchange Format (ATIF, Harbor's RFC 0001), which Harbor,
// SkyRL and NeMo tools read: one trajectory per rollout, a step for each
// message the harness sent (system, user) and one for each model call the
// upstream answered (agent), the tool results that came back for a call's
// tool calls as that step's observation.
//
// The types here are ATIF's objects as evalflow fills them, not the whole
// format: no subagents, no multimodal content (a message's images are left
// out, its text kept).
package atif

import "encoding/json"

// SchemaVersion is the ATIF version the trajectories are written in.
const SchemaVersion = "ATIF-v1.7"

// Trajectory is one rollout in ATIF: its root object.
type Trajectory struct {
	SchemaVersion string `json:"schema_version"`
	// SessionID is the rollout's key (run/epoch/index/k).
	SessionID    string        `json:"session_id"`
	Agent        Agent         `json:"agent"`
	Steps        []Step        `json:"steps"`
	FinalMetrics *FinalMetrics `json:"final_metrics,omitempty"`
	Extra        *RolloutInfo  `json:"extra,omitempty"`
}

// Agent names the agent system: evalflow does not record which harness ran
// a rollout, so the caller names it; ModelName is the model that answered.
type Agent struct {
	Name      string `json:"name"`
	Version   string `json:"version"`
	ModelName string `json:"model_name,omitempty"`
	// ToolDefinitions are the tools the harness offered the model, in
	// OpenAI's function-calling shape.
	ToolDefinitions []ToolDefinition `json:"tool_definitions,omitempty"`
}

// ToolDefinition is a tool offered to the model, as OpenAI's function
// calling writes it: {"type": "function", "function": {...}}.
type ToolDefinition struct {
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function is a tool's name, description and JSON-schema parameters.
type Function struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Step sources.
const (
	SourceSystem = "system"
	SourceUser   = "user"
	SourceAgent  = "agent"
)

// Step is one message of the conversation or one answered model call.
type Step struct {
	// StepID numbers the steps from 1.
	StepID int `json:"step_id"`
	// Timestamp is when the model call that carried or made the step
	// started, in RFC 3339.
	Timestamp        string       `json:"timestamp,omitempty"`
	Source           string       `json:"source"`
	ModelName        string       `json:"model_name,omitempty"`
	Message          string       `json:"message"`
	ReasoningContent string       `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall   `json:"tool_calls,omitempty"`
	Observation      *Observation `json:"observation,omitempty"`
	Metrics          *Metrics     `json:"metrics,omitempty"`
	// IsCopiedContext marks an assistant message the harness sent that no
	// call of this rollout answered (a conversation it started from, or
	// one it rewrote): context, not something to train on.
	IsCopiedContext bool `json:"is_copied_context,omitempty"`
	// LLMCallCount is 1 on a step of an answered call.
	LLMCallCount *int      `json:"llm_call_count,omitempty"`
	Extra        *TurnInfo `json:"extra,omitempty"`
}

// ToolCall is a tool call of the model's answer. Arguments is a JSON
// object: the call's arguments, or {"raw": text} when they were not one.
type ToolCall struct {
	ToolCallID   string          `json:"tool_call_id"`
	FunctionName string          `json:"function_name"`
	Arguments    json.RawMessage `json:"arguments"`
}

// Observation holds what came back for a step's tool calls.
type Observation struct {
	Results []ObservationResult `json:"results"`
}

// ObservationResult is one tool result; SourceCallID is the tool call it
// answers, empty for a result whose call no step made.
type ObservationResult struct {
	SourceCallID string `json:"source_call_id,omitempty"`
	Content      string `json:"content"`
}

// Metrics are an answered call's usage, cost and, for a run that traced
// tokens, its token ids and log probabilities. Nil fields were not
// reported.
type Metrics struct {
	// PromptTokens counts every prompt token, CachedTokens those read
	// from the provider's cache.
	PromptTokens       *int           `json:"prompt_tokens,omitempty"`
	CompletionTokens   *int           `json:"completion_tokens,omitempty"`
	CachedTokens       *int           `json:"cached_tokens,omitempty"`
	CostUSD            *float64       `json:"cost_usd,omitempty"`
	PromptTokenIDs     []int32        `json:"prompt_token_ids,omitempty"`
	CompletionTokenIDs []int32        `json:"completion_token_ids,omitempty"`
	Logprobs           []float32      `json:"logprobs,omitempty"`
	Extra              *MetricsExtras `json:"extra,omitempty"`
}

// MetricsExtras are the usage counts ATIF has no field for.
type MetricsExtras struct {
	ReasoningTokens          int `json:"reasoning_tokens,omitempty"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens,omitempty"`
}

// FinalMetrics sums the steps' metrics. TotalCostUSD is absent when a
// call's cost is unknown (a model without a price).
type FinalMetrics struct {
	TotalPromptTokens     int      `json:"total_prompt_tokens"`
	TotalCompletionTokens int      `json:"total_completion_tokens"`
	TotalCachedTokens     int      `json:"total_cached_tokens"`
	TotalCostUSD          *float64 `json:"total_cost_usd,omitempty"`
	TotalSteps            int      `json:"total_steps"`
}

// RolloutInfo is the trajectory's extra: the rollout's place in its run
// and how it ended, as its record says.
type RolloutInfo struct {
	RunID   string  `json:"run_id"`
	TaskID  string  `json:"task_id"`
	Epoch   int     `json:"epoch"`
	Index   int64   `json:"index"`
	K       int     `json:"k"`
	Attempt int     `json:"attempt"`
	Status  string  `json:"status"`
	Reward  float64 `json:"reward"`
	// Metrics are the rubric's named numbers behind Reward.
	Metrics   map[string]float64 `json:"metrics,omitempty"`
	ErrorKind string             `json:"error_kind,omitempty"`
	Error     string             `json:"error,omitempty"`
}

// TurnInfo is a step's extra: the model call (the trace's turn) the step
// stands for, on agent steps and on the system step of a failed call.
type TurnInfo struct {
	Turn         int    `json:"turn"`
	FinishReason string `json:"finish_reason,omitempty"`
	// PolicyVersion is the version of the weights that answered.
	PolicyVersion *int64 `json:"policy_version,omitempty"`
	Provider      string `json:"provider,omitempty"`
	// Status, Error and Limit say how a failed call failed.
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
	Limit  string `json:"limit,omitempty"`
}
