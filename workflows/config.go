// Package workflows holds evalflow's Temporal workflows. Everything here is
// deterministic: no I/O, clocks, goroutines, map-ordered iteration or
// math/rand. Activities do the work; workflows only decide what runs next.
package workflows

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/rollout"
)

// Search attributes evalflow sets on its workflows (keyword type).
const (
	AttrRunID   = "EvalflowRunId"
	AttrModel   = "EvalflowModel"
	AttrTaskset = "EvalflowTaskset"
	// AttrHarness is the harness of a sweep's cell (SweepCell.HarnessName).
	AttrHarness = "EvalflowHarness"
)

// SearchAttributes are the search attributes a run's workflows carry.
func SearchAttributes(cfg RunConfig) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(
		temporal.NewSearchAttributeKeyKeyword(AttrRunID).ValueSet(cfg.RunID),
		temporal.NewSearchAttributeKeyKeyword(AttrModel).ValueSet(cfg.Model),
		temporal.NewSearchAttributeKeyKeyword(AttrTaskset).ValueSet(TasksetName(cfg.Taskset)),
	)
}

// TasksetName is a run's taskset as people name it and search for it: a
// registry dataset's name@version, without the resolved tasks its
// reference carries (registry:name@version#…, tasksets.Lock.Ref); any
// other reference as it is.
func TasksetName(ref string) string {
	if rest, ok := strings.CutPrefix(ref, "registry:"); ok {
		name, _, _ := strings.Cut(rest, "#")
		return name
	}
	return ref
}

// runAttributes keeps evalflow's own attributes of have: those a child
// workflow inherits. A run started without them (a namespace lacking them)
// passes none on.
func runAttributes(have temporal.SearchAttributes) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(RunAttributeUpdates(have, AttrRunID, AttrModel, AttrTaskset)...)
}

// RunAttributeUpdates are the keyword attributes names of have, those it
// holds, in the order of names.
func RunAttributeUpdates(have temporal.SearchAttributes, names ...string) []temporal.SearchAttributeUpdate {
	var updates []temporal.SearchAttributeUpdate
	for _, name := range names {
		key := temporal.NewSearchAttributeKeyKeyword(name)
		if v, ok := have.GetKeyword(key); ok {
			updates = append(updates, key.ValueSet(v))
		}
	}
	return updates
}

// EvalName is the registered name of the Eval workflow.
const EvalName = "EvalWorkflow"

// QueryProgress is the query type that returns a Progress.
const QueryProgress = "progress"

// RunConfig is everything a run needs except secrets: API keys and tunnel
// credentials live only in the worker's environment.
type RunConfig struct {
	RunID   string `json:"run_id"`
	Taskset string `json:"taskset"`
	// Tasks is how many task positions to run; 0 means the whole (finite) taskset.
	Tasks           int64                 `json:"tasks"`
	RolloutsPerTask int                   `json:"rollouts_per_task"`
	MaxConcurrent   int                   `json:"max_concurrent"`
	Seed            uint64                `json:"seed"`
	Shuffle         bool                  `json:"shuffle"`
	Model           string                `json:"model"`
	Sampling        rollout.Sampling      `json:"sampling"`
	Harness         rollout.HarnessConfig `json:"harness"`
	Rubric          string                `json:"rubric"`
	Limits          Limits                `json:"limits"`
	// RetryFailed reruns the rollouts an eval with the same run id stored as
	// failures (timeouts, harness exits, …) and keeps its successes; without
	// it every stored rollout is reused. The summary counts both (Result's
	// Reused and Rerun). Training and pull runs always rerun failures. The
	// starter's --retry-failed on eval and resume.
	RetryFailed bool `json:"retry_failed,omitempty"`
	// MaxFailures fails an eval with more failed rollouts than this, once
	// all are stored: a count when at least 1, a fraction of the run's
	// rollouts when below 1, no limit when 0. Training runs use
	// TrainConfig.MaxFailures per epoch.
	MaxFailures float64 `json:"max_failures,omitempty"`
	// MaxRunCostUSD stops an eval from starting rollouts once the stored
	// rollouts' cost (Result.CostUSD) reaches it: the rollouts in flight
	// finish and are stored, and the run ends with Result.Stopped set
	// (StoppedMaxRunCost). Resuming with a higher bound continues it. 0 is
	// no bound.
	MaxRunCostUSD float64 `json:"max_run_cost_usd,omitempty"`
}

// Limits bound how a run retries and when it checkpoints.
type Limits struct {
	// MaxAttempts is how often a rollout is retried after infrastructure
	// failures (lost worker, tunnel, upstream outage) before it is recorded failed.
	MaxAttempts int `json:"max_attempts"`
	// PassThreshold is the reward at or above which a rollout counts as a pass for pass@k.
	PassThreshold float64 `json:"pass_threshold"`
	// ContinueAsNewAfter is how many rollouts one workflow run executes before
	// it continues as new, keeping each history small.
	ContinueAsNewAfter int `json:"continue_as_new_after"`
	// HeartbeatTimeout is how long a silent rollout is trusted before its
	// worker is presumed dead and the rollout moves elsewhere.
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout"`
	// HostStartTimeout is how long a step waits to start on the worker that
	// acquired its slot; past it the worker is presumed gone and the rollout
	// is acquired again elsewhere. Capacity is reserved at Acquire, so a live
	// worker starts these steps at once.
	HostStartTimeout time.Duration `json:"host_start_timeout,omitempty"`
}

// Defaults for a RunConfig's zero fields.
const (
	DefaultRolloutsPerTask    = 1
	DefaultMaxConcurrent      = 32
	DefaultMaxAttempts        = 5
	DefaultContinueAsNewAfter = 500
	DefaultHarnessTimeout     = 10 * time.Minute
	DefaultHeartbeatTimeout   = 30 * time.Second
	DefaultHostStartTimeout   = 10 * time.Second
	DefaultMaxTurns           = 8
	DefaultRubric             = "numeric"
)

// WithDefaults fills the zero fields of c.
func (c RunConfig) WithDefaults() RunConfig {
	if c.RolloutsPerTask <= 0 {
		c.RolloutsPerTask = DefaultRolloutsPerTask
	}
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.Rubric == "" {
		c.Rubric = DefaultRubric
	}
	if c.Harness.Timeout <= 0 {
		c.Harness.Timeout = DefaultHarnessTimeout
	}
	if c.Harness.MaxTurns <= 0 {
		c.Harness.MaxTurns = DefaultMaxTurns
	}
	if c.Limits.MaxAttempts <= 0 {
		c.Limits.MaxAttempts = DefaultMaxAttempts
	}
	if c.Limits.PassThreshold <= 0 {
		c.Limits.PassThreshold = 1
	}
	if c.Limits.ContinueAsNewAfter <= 0 {
		c.Limits.ContinueAsNewAfter = DefaultContinueAsNewAfter
	}
	if c.Limits.HeartbeatTimeout <= 0 {
		c.Limits.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if c.Limits.HostStartTimeout <= 0 {
		c.Limits.HostStartTimeout = DefaultHostStartTimeout
	}
	return c
}

// FieldError is a field of a RunConfig or a TrainConfig whose value
// Validate refuses. Field is its JSON name, dotted below the top
// (harness.max_turns), for a front end to name its own option for it.
type FieldError struct {
	Field string
	// Problem is what is wrong, beginning with the value when there is
	// one: "-1 is negative", "0: must be at least 1", "is empty".
	Problem string
}

func (e *FieldError) Error() string { return e.Field + " " + e.Problem }

// Validate reports the first thing wrong with c, as a *FieldError. The
// fields WithDefaults fills from zero are checked as they are: a caller
// that refuses a zero given, rather than take the default, calls Validate
// first.
func (c RunConfig) Validate() error {
	for _, f := range []struct{ name, value string }{{"run_id", c.RunID}, {"taskset", c.Taskset}, {"model", c.Model}} {
		if f.value == "" {
			return &FieldError{Field: f.name, Problem: "is empty"}
		}
	}
	maxTokens := 1 // unset: the model's own
	if c.Sampling.MaxTokens != nil {
		maxTokens = *c.Sampling.MaxTokens
	}
	return firstError(
		atLeast("tasks", c.Tasks, 0),
		atLeast("rollouts_per_task", c.RolloutsPerTask, 1),
		atLeast("max_concurrent", c.MaxConcurrent, 1),
		notNegative("max_failures", c.MaxFailures, ""),
		notNegative("max_run_cost_usd", c.MaxRunCostUSD, ": give USD per run, or 0 for no limit"),
		atLeast("sampling.max_tokens", maxTokens, 1),
		validateHarness(c.Harness),
		c.Limits.validate(),
	)
}

// validateHarness reports the first thing wrong with a run's harness
// settings.
func validateHarness(h rollout.HarnessConfig) error {
	if !slices.Contains([]string{"", "chat", "responses", "anthropic"}, h.Dialect) {
		return &FieldError{Field: "harness.dialect", Problem: fmt.Sprintf("%q: want chat, responses or anthropic", h.Dialect)}
	}
	if v := h.PolicyVersionHeader; v != "" && !headerName(v) {
		return &FieldError{Field: "harness.policy_version_header",
			Problem: fmt.Sprintf("%q is not an HTTP header name: letters, digits and !#$%%&'*+-.^_`|~ only, e.g. x-policy-version", v)}
	}
	if h.Timeout <= 0 {
		return &FieldError{Field: "harness.timeout", Problem: h.Timeout.String() + ": must be positive"}
	}
	return firstError(
		notNegative("harness.verifier_timeout", h.VerifierTimeout, ""),
		atLeast("harness.max_turns", h.MaxTurns, 1),
		atLeast("harness.max_tokens_total", h.MaxTokensTotal, 0),
		notNegative("harness.max_model_time", h.MaxModelTime, ""),
		notNegative("harness.max_cost_usd", h.MaxCostUSD, ": give USD per rollout, or 0 for no limit"),
		atLeast("harness.top_logprobs", h.TopLogprobs, 0),
	)
}

// validate reports the first thing wrong with l.
func (l Limits) validate() error {
	if l.HeartbeatTimeout < time.Second {
		return &FieldError{Field: "limits.heartbeat_timeout",
			Problem: l.HeartbeatTimeout.String() + ": want at least 1s (a rollout's worker heartbeats every quarter of it)"}
	}
	return firstError(
		atLeast("limits.max_attempts", l.MaxAttempts, 1),
		atLeast("limits.continue_as_new_after", l.ContinueAsNewAfter, 1),
	)
}

// headerName reports whether s is an HTTP header field name (RFC 9110's
// token).
func headerName(s string) bool {
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", r):
		default:
			return false
		}
	}
	return s != ""
}

// notNegative refuses a negative v of field; hint ends the message.
func notNegative[N ~int | ~int64 | ~float64](field string, v N, hint string) error {
	if v < 0 {
		return &FieldError{Field: field, Problem: fmt.Sprintf("%v is negative%s", v, hint)}
	}
	return nil
}

// atLeast refuses a v of field below least, a negative one as negative.
func atLeast[N ~int | ~int64](field string, v, least N) error {
	if err := notNegative(field, v, ""); err != nil {
		return err
	}
	if v < least {
		return &FieldError{Field: field, Problem: fmt.Sprintf("%d: must be at least %d", v, least)}
	}
	return nil
}

// firstError is the first of errs that is not nil.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
