package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/engine"
)

// Kinds (labelSandbox) of what a multi-container rollout adds beside its
// sandbox: a container of each service of its compose file, and the
// network of its own they and the sandbox share. Both carry the
// sandbox's labels, so a worker removes them as it removes sandboxes.
const (
	kindService = "service"
	kindNetwork = "rollout-network"
)

// labelService names the compose service a container runs.
const labelService = "evalflow.service"

// group is a multi-container rollout's network and the containers of its
// services, started before its sandbox and removed after it.
type group struct {
	r        *Runtime
	spec     harness.Spec
	network  string       // the network's name
	subnet   netip.Prefix // its addresses: the sandbox's peers
	internet bool
	ids      map[string]string // service → container

	removeOnce sync.Once
	removeErr  error
}

// newGroup creates a rollout's network: a bridge of its own, internal
// (no route out) when the task does not allow the internet, its subnet
// the engine's pick.
func (r *Runtime) newGroup(ctx context.Context, spec harness.Spec, env harness.Environment) (*group, error) {
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	g := &group{r: r, spec: spec, network: "evalflow-rollout-" + hex.EncodeToString(suffix), internet: env.Internet(), ids: map[string]string{}}
	if _, err := r.Engine.CreateNetworkWith(ctx, engine.NetworkOptions{Name: g.network, Labels: r.labels(spec, kindNetwork), Internal: !g.internet}); err != nil {
		return nil, fmt.Errorf("create the rollout's network: %w", err)
	}
	n, err := r.Engine.InspectNetwork(ctx, g.network)
	if err == nil && len(n.IPAM.Config) > 0 {
		g.subnet, err = netip.ParsePrefix(n.IPAM.Config[0].Subnet)
	} else if err == nil {
		err = errors.New("the engine gave it no subnet")
	}
	if err != nil {
		_ = g.remove(context.Background())
		return nil, fmt.Errorf("the rollout's network %s: %w", g.network, err)
	}
	return g, nil
}

// endpoint is how a container of service name joins the group's network:
// the service's name and its aliases resolve to it.
func (g *group) endpoint(name string, s types.ServiceConfig) *engine.NetworkingConfig {
	aliases := []string{name}
	for _, n := range s.Networks {
		if n != nil {
			aliases = append(aliases, n.Aliases...)
		}
	}
	slices.Sort(aliases)
	return &engine.NetworkingConfig{EndpointsConfig: map[string]engine.EndpointConfig{g.network: {Aliases: slices.Compact(aliases)}}}
}

// startService creates and starts the container of service name from
// image, as the compose file says (its environment, entrypoint, command,
// user and workdir), on the group's network, and fences it as a sandbox
// is fenced: the agent may reach into a service (a database runs what
// it is sent), so a service reaches no more of the host than the agent.
func (g *group) startService(ctx context.Context, name, image string, s types.ServiceConfig) error {
	labels := g.r.labels(g.spec, kindService)
	labels[labelService] = name
	cfg := engine.ContainerConfig{
		Image: image, Cmd: s.Command, Entrypoint: s.Entrypoint, Env: environment(s),
		User: s.User, WorkingDir: s.WorkingDir, Labels: labels,
		HostConfig: engine.HostConfig{NetworkMode: g.network, Init: s.Init != nil && *s.Init, CapAdd: s.CapAdd},
		Networking: g.endpoint(name, s),
	}
	if s.Entrypoint == nil {
		cfg.Entrypoint = nil // the image's
	}
	id, err := g.r.Engine.CreateContainer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("service %s: create: %w", name, err)
	}
	g.ids[name] = id
	if err := g.r.Engine.StartContainer(ctx, id); err != nil {
		return fmt.Errorf("service %s: start: %w", name, err)
	}
	return g.fence(ctx, id)
}

// fence writes the firewall into the network namespace of container id
// of the group: the group's network and, when the task allows it, the
// internet; never the worker's host.
func (g *group) fence(ctx context.Context, id string) error {
	ct, err := g.r.Engine.InspectContainer(ctx, id)
	if err != nil {
		return err
	}
	if !ct.State.Running {
		return nil // it ended at once: nothing to fence
	}
	if err := confineTo(ctx, ct.State.Pid, g.subnet, g.internet); err != nil {
		return &harness.ConfigError{Err: err}
	}
	return nil
}

// environment is a service's environment as KEY=VALUE; a variable given
// no value is left out, as the worker's environment is not the
// service's.
func environment(s types.ServiceConfig) []string {
	var env []string
	for k, v := range s.Environment {
		if v != nil {
			env = append(env, k+"="+*v)
		}
	}
	slices.Sort(env)
	return env
}

// remove removes the services' containers, then the network.
func (g *group) remove(ctx context.Context) error {
	if g == nil {
		return nil
	}
	g.removeOnce.Do(func() {
		var errs []error
		for _, id := range g.ids {
			errs = append(errs, g.r.Engine.RemoveContainer(ctx, id))
		}
		errs = append(errs, g.r.Engine.RemoveNetwork(ctx, g.network))
		g.removeErr = errors.Join(errs...)
	})
	return g.removeErr
}

// joining is how the sandbox of a multi-container rollout joins its
// group's network: the agent's service's names there, its environment,
// and its entrypoint and command, which run beside the keeper in place of
// the image's.
type joining struct {
	group    *group
	endpoint *engine.NetworkingConfig
	env      []string
	argv     []string
}

// groupOf is j's group; nil for a sandbox of its own.
func (j *joining) groupOf() *group {
	if j == nil {
		return nil
	}
	return j.group
}

// apply puts the sandbox's container cfg of image img on the group's
// network.
func (j *joining) apply(cfg *engine.ContainerConfig, img *engine.Image) {
	if j == nil {
		return
	}
	cfg.HostConfig.NetworkMode = j.group.network
	cfg.Networking = j.endpoint
	cfg.Env = append(cfg.Env, j.env...)
	if len(j.argv) > 0 {
		img.Config.Entrypoint, img.Config.Cmd = j.argv, nil
	}
}

// fence fences the started sandbox id: on its own network as every
// sandbox, or as a member of its group.
func (j *joining) fence(ctx context.Context, r *Runtime, id string, env harness.Environment) error {
	if j == nil {
		return r.fence(ctx, id, env)
	}
	return j.group.fence(ctx, id)
}
