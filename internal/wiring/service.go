package wiring

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"
)

// Names of the flags of a worker run as a service (the worker binary).
const (
	FlagStartTimeout = "start-timeout"
	FlagDrainTimeout = "drain-timeout"
)

// Defaults of ServiceFlags.
const (
	DefaultStartTimeout = 3 * time.Minute
	DefaultDrainTimeout = 30 * time.Second
)

// ServiceFlags are the worker binary's flags for how it starts and stops:
// how long it waits for Temporal and the run store, and how long running
// rollouts may go on once it is told to stop.
func ServiceFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: FlagStartTimeout, Value: DefaultStartTimeout, EnvVars: []string{"EVALFLOW_START_TIMEOUT"},
			Usage: "how long a starting worker waits for Temporal and the run store to answer, retrying with backoff, before it exits naming what did not answer"},
		&cli.DurationFlag{Name: FlagDrainTimeout, Value: DefaultDrainTimeout, EnvVars: []string{"EVALFLOW_DRAIN_TIMEOUT"},
			Usage: "on SIGTERM or SIGINT, how long running rollouts may go on; then they are handed back and retried at once on another worker (a second signal hands them back now)"},
	}
}

// ServiceTimeouts reads --start-timeout and --drain-timeout.
func ServiceTimeouts(cctx *cli.Context) (start, drain time.Duration, err error) {
	start, drain = cctx.Duration(FlagStartTimeout), cctx.Duration(FlagDrainTimeout)
	switch {
	case start <= 0:
		return 0, 0, fmt.Errorf("--%s %s: must be positive (how long to wait for Temporal and the run store)", FlagStartTimeout, start)
	case drain < 0:
		return 0, 0, fmt.Errorf("--%s %s is negative (0 hands running rollouts back at once)", FlagDrainTimeout, drain)
	}
	return start, drain, nil
}
