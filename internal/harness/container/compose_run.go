package container

import (
	"context"
	"fmt"
	"sort"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/tasksets"
)

// runCompose runs an attempt of a multi-container task: its services'
// images built (or pulled), a network of the rollout's own, each service
// started on it in depends_on order and, where it has a healthcheck,
// healthy; then the sandbox, the agent's service, joins it, fenced from
// the worker's host as every sandbox is, and the harness runs in it. The
// services and the network are removed with the sandbox.
func (r *Runtime) runCompose(ctx context.Context, spec harness.Spec, ws *harness.Workspace, env harness.Environment) (harness.Result, error) {
	c, err := loadCompose(ctx, spec.Task)
	if err != nil {
		return harness.Result{}, err
	}
	if setup, err := harness.VerifierSetupOf(spec.Task); err == nil && setup.Separate() {
		return harness.Result{}, harness.TaskConfigError(spec.Task.ID, fmt.Errorf("task %s: environment/%s: a multi-container task's verifier runs beside its services: environment_mode = \"separate\" is not supported for it", spec.Task.ID, c.file))
	}
	images, logs, err := r.composeImages(ctx, spec.Task, c, env)
	if err != nil {
		return harness.Result{SessionLogs: logs}, err
	}
	g, err := r.newGroup(ctx, spec, env)
	if err != nil {
		return harness.Result{SessionLogs: logs}, err
	}
	if err := g.startAll(ctx, c, images); err != nil {
		_ = g.remove(context.Background())
		return harness.Result{SessionLogs: logs}, err
	}
	main := c.project.Services[c.main]
	sb, err := r.startOn(ctx, spec, ws, images[c.main], env, &joining{group: g, endpoint: g.endpoint(c.main, main), env: environment(main), argv: append(append([]string{}, main.Entrypoint...), main.Command...)})
	if err != nil {
		return harness.Result{SessionLogs: logs}, err
	}
	ws.Attach(sb)
	res, err := sb.runHarness(ctx, spec, env)
	res.SessionLogs = append(append(res.SessionLogs, logs...), sb.service.traceLog()...)
	if err != nil || res.TimedOut {
		_ = ws.Remove() // stops the sandbox, its services and its network
	}
	return res, err
}

// prepareCompose builds (or finds) the images of a multi-container task's
// services ahead of its rollouts.
func (r *Runtime) prepareCompose(ctx context.Context, task tasksets.Task, env harness.Environment) error {
	c, err := loadCompose(ctx, task)
	if err != nil {
		return err
	}
	_, _, err = r.composeImages(ctx, task, c, env)
	return err
}

// composeImages are the images of the task's services, by service: each
// built from its build context through the runtime's image building
// (cached by content, its output kept for the trace), else its image,
// pulled when missing; the agent's service with neither runs Image.
func (r *Runtime) composeImages(ctx context.Context, task tasksets.Task, c *composeTask, env harness.Environment) (map[string]string, []harness.SessionLog, error) {
	images := map[string]string{}
	var logs []harness.SessionLog
	for _, name := range append([]string{c.main}, c.order...) {
		s := c.project.Services[name]
		var err error
		switch {
		case s.Build != nil:
			var b *build
			images[name], b, err = r.build(ctx, task, s.Build.Context, env)
			for _, l := range b.traceLog() {
				l.Name = name + "-" + l.Name
				logs = append(logs, l)
			}
		case s.Image != "":
			images[name], err = s.Image, r.ensure(ctx, task, s.Image)
		default:
			images[name] = r.Image
			if images[name] == "" {
				images[name] = DefaultImage
			}
			err = r.ensure(ctx, task, images[name])
		}
		if err != nil {
			return nil, logs, fmt.Errorf("service %s: %w", name, err)
		}
	}
	return images, logs, nil
}

// startAll starts the services but the agent's, each once those it
// depends on are started, healthy or completed as it asks, and returns
// once every service with a healthcheck is healthy and what the agent's
// service depends on holds.
func (g *group) startAll(ctx context.Context, c *composeTask, images map[string]string) error {
	healthy := map[string]bool{}
	awaitHealthy := func(name string) error {
		p := probeOf(c.project.Services[name].HealthCheck)
		if p == nil || healthy[name] {
			return nil
		}
		if err := g.awaitHealthy(ctx, name, p); err != nil {
			return err
		}
		healthy[name] = true
		return nil
	}
	await := func(deps types.DependsOnConfig) error {
		names := make([]string, 0, len(deps))
		for d := range deps {
			names = append(names, d)
		}
		sort.Strings(names)
		for _, d := range names {
			var err error
			switch deps[d].Condition {
			case types.ServiceConditionHealthy:
				err = awaitHealthy(d)
			case types.ServiceConditionCompletedSuccessfully:
				err = g.awaitCompleted(ctx, d)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	for _, name := range c.order {
		s := c.project.Services[name]
		if err := await(s.DependsOn); err != nil {
			return err
		}
		if err := g.startService(ctx, name, images[name], s); err != nil {
			return err
		}
	}
	if err := await(c.project.Services[c.main].DependsOn); err != nil {
		return err
	}
	for _, name := range c.order {
		if err := awaitHealthy(name); err != nil {
			return err
		}
	}
	return nil
}
