package tunnel

import "errors"

// ErrDead is wrapped by health-check errors of an exposure that stopped
// working.
var ErrDead = errors.New("tunnel is dead")

// Error is a failure to set up, check or tear down a tunnel. It is scoped to
// the tunnel itself: an error in the rollout that uses the tunnel is never an
// Error. Messages never carry credentials.
type Error struct {
	// Tunnel names the implementation: "frp", "ssh", "custom", "local".
	Tunnel string
	// Op is what failed: "expose", "health", "close".
	Op  string
	Err error
}

func (e *Error) Error() string { return e.Tunnel + " tunnel: " + e.Op + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// IsError reports whether err is, or wraps, a tunnel *Error.
func IsError(err error) bool {
	var te *Error
	return errors.As(err, &te)
}
