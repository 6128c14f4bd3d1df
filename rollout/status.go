package rollout

// Rollout statuses.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// Error kinds recorded for rollouts that ended with StatusError. All but
// KindInfra, KindVerifier and KindConfig are the agent's outcome; KindInfra is a
// rollout whose infrastructure kept failing until its attempts ran out.
const (
	KindHarnessExit = "harness_exit"
	KindTimeout     = "timeout"
	// KindOOM is a harness killed for its sandbox's memory limit (the
	// task's memory_mb): the agent's outcome.
	KindOOM           = "oom"
	KindContextLength = "context_length"
	KindRefusal       = "refusal"
	// KindMaxTurns is a harness that failed after as many model calls as
	// the run allows, from a trace made before the interception server
	// enforced the limit; newer ones are KindLimit + trace.LimitTurns.
	KindMaxTurns = "max_turns"
	// KindLimit prefixes the limit the interception server enforced on
	// the rollout's model calls: limit:turns, limit:tokens,
	// limit:model_time. An agent's outcome, never retried.
	KindLimit = "limit:"
	KindInfra = "infrastructure"
	// KindVerifier is a rollout whose task's verifier kept failing (it
	// crashed, hung past its timeout or wrote no valid reward) until its
	// attempts ran out: the verifier's fault, never the agent's.
	KindVerifier = "verifier"
	// KindConfig is a rollout of a task that cannot run as configured
	// here, whatever the agent does: its image does not build, its
	// environment asks for what the runtime does not give. Recorded
	// without retries, never the agent's, left out of a run's scores, and
	// run again when the run is resumed.
	KindConfig = "config"
)

// Error types set on application errors at the activity boundary. The
// workflows decide what to retry by these names, so they are part of the
// history format.
const (
	// ErrTypeSlotLost: the slot is not on this worker (it restarted); re-acquire.
	ErrTypeSlotLost = "SlotLost"
	// ErrTypeTunnel: exposing the interception server failed; retried.
	ErrTypeTunnel = "TunnelError"
	// ErrTypeUpstream: the model provider kept failing (429/5xx/connection).
	ErrTypeUpstream = "UpstreamUnavailable"
	// ErrTypeRuntime: the harness runtime failed (workdir, spawn); retried.
	ErrTypeRuntime = "RuntimeError"
	// ErrTypeRubric: the rubric could not score a finished rollout (its
	// command failed or printed no score, its judge did not answer with
	// one); retried, never a reward of 0.
	ErrTypeRubric = "RubricError"
	// ErrTypeConfig: the run cannot work as configured (unknown taskset,
	// missing harness command, bad rubric). Not retried; fails the run.
	ErrTypeConfig = "ConfigError"
	// ErrTypeVerifier: the task's verifier crashed, hung past its timeout or
	// wrote no valid reward; retried like infrastructure, and recorded as
	// KindVerifier when attempts run out, never as a reward of 0.
	ErrTypeVerifier = "VerifierError"
	// ErrTypeWorkerStopped: the worker was stopping and handed the
	// rollout back (its drain timeout passed); retried at once on another
	// worker like infrastructure, never the agent's.
	ErrTypeWorkerStopped = "WorkerStopped"
	// ErrTypeEngine: the container engine the sandboxes run on could not
	// be reached; the rollout waits for it, minutes at a time, without
	// using up its attempts, and is recorded as infrastructure if it
	// never comes back. Never the agent's.
	ErrTypeEngine = "EngineUnavailable"
)
