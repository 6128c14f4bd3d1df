package container

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/engine"
)

// A service's healthcheck is run by the worker, through the engine's exec,
// as the engine would run it: Podman runs healthchecks from systemd
// timers, which a worker's host need not have. The defaults are Docker's.
const (
	defaultHealthInterval = 30 * time.Second
	defaultHealthTimeout  = 30 * time.Second
	defaultHealthRetries  = 3
	// exitPoll is how often a service that must complete is looked at.
	exitPoll = 250 * time.Millisecond
	// healthOutputLimit bounds a failed check's output in an error.
	healthOutputLimit = 2 << 10
)

// probe is one service's healthcheck.
type probe struct {
	argv                    []string
	interval, startInterval time.Duration
	timeout, startPeriod    time.Duration
	retries                 int
}

// probeOf is the service's healthcheck; nil when it has none.
func probeOf(hc *types.HealthCheckConfig) *probe {
	if hc == nil || hc.Disable || len(hc.Test) == 0 {
		return nil
	}
	p := &probe{interval: defaultHealthInterval, timeout: defaultHealthTimeout, retries: defaultHealthRetries}
	switch hc.Test[0] {
	case "NONE":
		return nil
	case "CMD":
		p.argv = hc.Test[1:]
	case "CMD-SHELL":
		p.argv = []string{"/bin/sh", "-c", strings.Join(hc.Test[1:], " ")}
	default:
		p.argv = []string{"/bin/sh", "-c", strings.Join(hc.Test, " ")}
	}
	set := func(d *types.Duration, to *time.Duration) {
		if d != nil && *d > 0 {
			*to = time.Duration(*d)
		}
	}
	set(hc.Interval, &p.interval)
	set(hc.Timeout, &p.timeout)
	set(hc.StartPeriod, &p.startPeriod)
	p.startInterval = p.interval
	set(hc.StartInterval, &p.startInterval)
	if hc.Retries != nil && *hc.Retries > 0 {
		p.retries = int(*hc.Retries)
	}
	return p
}

// awaitHealthy runs the service's healthcheck in container id until it
// passes. Failures within its start_period do not count; retries
// consecutive ones after it, or the container ending, fail the attempt as
// the runtime's error: a service that never became healthy is no
// failure of the agent's.
func (g *group) awaitHealthy(ctx context.Context, name string, p *probe) error {
	id := g.ids[name]
	start, fails := time.Now(), 0
	for {
		if err := g.running(ctx, name); err != nil {
			return err
		}
		out := harness.NewTail(healthOutputLimit)
		pctx, cancel := context.WithTimeout(ctx, p.timeout)
		code, err := g.r.Engine.Exec(pctx, id, engine.ExecConfig{Cmd: p.argv}, out, out)
		cancel()
		if err == nil && code == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := p.interval
		if time.Since(start) < p.startPeriod {
			wait = p.startInterval
		} else if fails++; fails >= p.retries {
			return fmt.Errorf("service %s of task %s never became healthy (%d checks failed after its start period; the last: %q exited %d, %v: %s)",
				name, g.spec.Task.ID, fails, p.argv, code, err, strings.TrimSpace(out.String()))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// running fails when the service's container has ended.
func (g *group) running(ctx context.Context, name string) error {
	ct, err := g.r.Engine.InspectContainer(ctx, g.ids[name])
	if err != nil {
		return fmt.Errorf("service %s: %w", name, err)
	}
	if !ct.State.Running {
		return fmt.Errorf("service %s of task %s ended (exit code %d) before it became healthy", name, g.spec.Task.ID, ct.State.ExitCode)
	}
	return nil
}

// awaitCompleted waits until the service's container has ended, and
// fails unless it exited 0 (service_completed_successfully).
func (g *group) awaitCompleted(ctx context.Context, name string) error {
	for {
		ct, err := g.r.Engine.InspectContainer(ctx, g.ids[name])
		if err != nil {
			return fmt.Errorf("service %s: %w", name, err)
		}
		if !ct.State.Running && ct.State.Status != "created" {
			if ct.State.ExitCode != 0 {
				return fmt.Errorf("service %s of task %s exited with code %d; a service depended on to complete must exit 0", name, g.spec.Task.ID, ct.State.ExitCode)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(exitPoll):
		}
	}
}
