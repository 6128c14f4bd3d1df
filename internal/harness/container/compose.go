package container

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/tasksets"
)

// A multi-container task's environment/docker-compose.yaml (or .yml)
// names the agent's container and the services beside it, as Harbor reads
// it: the agent works in the service "main", which Harbor's own base file
// builds from environment/Dockerfile (or the task's docker_image) when the
// task's file does not say otherwise, and which the task's file may add
// to (its environment, its depends_on). A file written for Terminal-Bench,
// whose agent's service is "client", is read with "client" as the agent's
// when it has no "main". The file is read by compose-go, interpolated
// with no variable of the worker's (a ${VAR:-default} takes its default).

// Service names of the agent's container.
const (
	mainService   = "main"
	clientService = "client"
)

// composeTask is a multi-container task's environment, read and checked.
type composeTask struct {
	file    string // the compose file's name in environment/
	dir     string // environment/
	project *types.Project
	main    string   // the agent's service
	order   []string // the other services, each after those it depends on
}

// loadCompose reads the compose file of a task's environment; one that
// does not parse, or asks for what a sandbox may not have, is a
// *harness.ConfigError naming the task, the service and the key.
func loadCompose(ctx context.Context, task tasksets.Task) (*composeTask, error) {
	c, err := readCompose(ctx, task)
	if err != nil {
		return nil, harness.TaskConfigError(task.ID, err)
	}
	return c, nil
}

func readCompose(ctx context.Context, task tasksets.Task) (*composeTask, error) {
	dir, err := filepath.EvalSymlinks(task.Environment)
	if err != nil {
		return nil, fmt.Errorf("task %s: environment: %w", task.ID, err)
	}
	c := &composeTask{file: harness.ComposeFile(dir), dir: dir}
	where := fmt.Sprintf("task %s: environment/%s", task.ID, c.file)
	opts, err := cli.NewProjectOptions([]string{filepath.Join(dir, c.file)},
		cli.WithWorkingDirectory(dir), cli.WithName(imageName(task.ID)), cli.WithEnv(nil),
		cli.WithResolvedPaths(true), cli.WithConsistency(false),
		cli.WithoutEnvironmentResolution, cli.WithoutLabelsResolution)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if c.project, err = opts.LoadProject(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	c.main = agentService(c.project)
	c.implyMain(task)
	for _, name := range c.project.ServiceNames() {
		if err := c.check(name); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	if c.project, err = c.project.WithServicesEnvironmentResolved(true); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if c.order, err = startOrder(c.project, c.main); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return c, nil
}

// agentService is the service the agent works in: "main", else
// Terminal-Bench's "client", else "main" implied.
func agentService(p *types.Project) string {
	if _, ok := p.Services[clientService]; ok {
		if _, ok := p.Services[mainService]; !ok {
			return clientService
		}
	}
	return mainService
}

// implyMain gives the agent's service what Harbor's base file gives it
// when the task's file does not: the build of environment/Dockerfile,
// else the task's docker_image; an image of neither runs the runtime's
// default image (left empty here).
func (c *composeTask) implyMain(task tasksets.Task) {
	s := c.project.Services[c.main]
	s.Name = c.main
	if s.Image == "" && s.Build == nil {
		if _, err := os.Stat(filepath.Join(c.dir, "Dockerfile")); err == nil {
			s.Build = &types.BuildConfig{Context: c.dir}
		} else if env, err := harness.EnvironmentOf(task); err == nil {
			s.Image = env.DockerImage
		}
	}
	if c.project.Services == nil {
		c.project.Services = types.Services{}
	}
	c.project.Services[c.main] = s
}

// defaultCaps are the capabilities a container has without asking:
// cap_add may name them, to no effect.
var defaultCaps = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}

// check refuses what the service asks for that a sandbox may not have,
// naming the compose key.
func (c *composeTask) check(name string) error {
	s := c.project.Services[name]
	refuse := func(key, why string) error {
		return fmt.Errorf("service %s: %s: %s", name, key, why)
	}
	switch {
	case hasDevices(s), len(s.Gpus) > 0:
		return refuse("deploy.resources.reservations.devices", "the container runtime gives a sandbox no GPU or device")
	case len(s.Devices) > 0:
		return refuse("devices", "a sandbox reaches no device of the worker's host")
	case len(s.Ports) > 0:
		return refuse("ports", "a sandbox publishes no port on the worker's host; the agent and the tests reach a service by its name on the rollout's network")
	case s.Privileged:
		return refuse("privileged", "a privileged container is not a sandbox")
	case s.NetworkMode != "":
		return refuse("network_mode: "+s.NetworkMode, "every service of a rollout is on the rollout's own network (host's, another container's or none are not given)")
	case s.Pid != "":
		return refuse("pid: "+s.Pid, "a service's processes are its own")
	case s.Ipc != "" || s.Uts != "" || s.UserNSMode != "":
		return refuse("ipc, uts, userns_mode", "a service's namespaces are its own")
	case len(s.SecurityOpt) > 0:
		return refuse("security_opt", "a sandbox's confinement is the engine's default")
	case len(s.VolumesFrom) > 0:
		return refuse("volumes_from", "a service shares no container's volumes")
	}
	for _, cap := range s.CapAdd {
		if !slices.Contains(defaultCaps, strings.TrimPrefix(strings.ToUpper(cap), "CAP_")) {
			return refuse("cap_add: "+cap, "a sandbox holds the engine's default capabilities only")
		}
	}
	if err := c.checkVolumes(name, s); err != nil {
		return err
	}
	for _, f := range s.EnvFiles {
		if !within(c.dir, f.Path) {
			return refuse("env_file: "+f.Path, "outside the task's environment directory")
		}
	}
	if s.Image == "" && s.Build == nil && name != c.main {
		return refuse("image", "a service needs an image or a build")
	}
	if s.Build != nil {
		return c.checkBuild(name, s.Build)
	}
	return nil
}

// hasDevices reports whether the service reserves devices (GPUs).
func hasDevices(s types.ServiceConfig) bool {
	return s.Deploy != nil && s.Deploy.Resources.Reservations != nil && len(s.Deploy.Resources.Reservations.Devices) > 0
}

// checkVolumes refuses a host path bound into a service and a named
// volume; an anonymous volume (a path alone) is the container's own
// files.
func (c *composeTask) checkVolumes(name string, s types.ServiceConfig) error {
	for _, v := range s.Volumes {
		switch {
		case v.Type == types.VolumeTypeBind:
			return fmt.Errorf("service %s: volumes: %s: a host path is not bound into a sandbox: a task's files go into its image (COPY)", name, v.Source)
		case v.Type == types.VolumeTypeVolume && v.Source != "":
			return fmt.Errorf("service %s: volumes: %s: named volumes are not supported: a service keeps its data in its own container", name, v.Source)
		case v.Type != types.VolumeTypeVolume && v.Type != types.VolumeTypeTmpfs:
			return fmt.Errorf("service %s: volumes: %s: a %s volume is not supported", name, v.Target, v.Type)
		}
	}
	return nil
}

// checkBuild refuses a build the runtime's image building does not
// reproduce: a context outside the environment, or another Dockerfile,
// target or build arguments.
func (c *composeTask) checkBuild(name string, b *types.BuildConfig) error {
	switch {
	case !within(c.dir, b.Context):
		return fmt.Errorf("service %s: build.context: %s is outside the task's environment directory", name, b.Context)
	case b.Dockerfile != "" && b.Dockerfile != "Dockerfile" && filepath.Clean(b.Dockerfile) != filepath.Join(b.Context, "Dockerfile"):
		return fmt.Errorf("service %s: build.dockerfile: %s: a build's Dockerfile is its context's Dockerfile", name, b.Dockerfile)
	case b.DockerfileInline != "", b.Target != "", len(b.Args) > 0, len(b.AdditionalContexts) > 0:
		return fmt.Errorf("service %s: build: only context is honoured (not dockerfile_inline, target, args or additional_contexts)", name)
	}
	return nil
}

// within reports whether p is dir or under it.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// startOrder is the services but main, each after those it depends on;
// a cycle, or a dependency on a service the file lacks, is refused.
func startOrder(p *types.Project, main string) ([]string, error) {
	var order []string
	state := map[string]int{} // 1: visiting, 2: done
	var visit func(name string) error
	visit = func(name string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("service %s: depends_on: a cycle", name)
		case 2:
			return nil
		}
		state[name] = 1
		deps := make([]string, 0, len(p.Services[name].DependsOn))
		for d := range p.Services[name].DependsOn {
			if _, ok := p.Services[d]; !ok {
				return fmt.Errorf("service %s: depends_on: %s is no service of the file", name, d)
			}
			deps = append(deps, d)
		}
		sort.Strings(deps)
		for _, d := range deps {
			if d == main {
				return fmt.Errorf("service %s: depends_on: %s: the agent's container starts last", name, d)
			}
			if err := visit(d); err != nil {
				return err
			}
		}
		state[name] = 2
		if name != main {
			order = append(order, name)
		}
		return nil
	}
	for _, name := range p.ServiceNames() {
		if err := visit(name); err != nil {
			return nil, err
		}
	}
	return order, nil
}
