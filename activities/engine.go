package activities

import (
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/rollout"
)

// runtimeErr is a failure of the harness runtime at what it was doing:
// an engine that could not be reached is rollout.ErrTypeEngine, which the
// workflow waits out without using up the rollout's attempts; anything
// else is rollout.ErrTypeRuntime, retried.
func runtimeErr(what string, err error) error {
	if engineUnavailable(err) {
		return temporal.NewApplicationErrorWithCause(what+": the container engine could not be reached", rollout.ErrTypeEngine, err)
	}
	return temporal.NewApplicationErrorWithCause(what, rollout.ErrTypeRuntime, err)
}

// engineUnavailable reports whether err is, or wraps, a container engine
// that could not be reached.
func engineUnavailable(err error) bool {
	var down interface{ EngineUnavailable() bool }
	return errors.As(err, &down) && down.EngineUnavailable()
}
