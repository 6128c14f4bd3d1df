package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os/exec"
	"strings"
	"time"
)

var _ Remote = (*Docker)(nil)

// ContractEnv names the variables of the harness contract (see Env) that a
// container is given.
var ContractEnv = []string{
	"OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL",
	"ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_MODEL",
	"EVALFLOW_TASK_FILE", "EVALFLOW_PROMPT", "EVALFLOW_ANSWER_FILE", "EVALFLOW_MAX_TURNS", "EVALFLOW_WORKDIR",
}

// Docker runs each harness in a fresh container of Image, its workdir mounted
// at the same path, with the contract variables (values are passed through
// the docker CLI's environment, never its arguments). A container has its
// own network, so the interception server is reached through the configured
// tunnel: a custom endpoint on the host gateway (HostGateway maps
// host.docker.internal to it) or frp/ssh.
type Docker struct {
	// Image holds the harness command.
	Image string
	// Network is the container network; docker's default when empty.
	Network string
	// HostGateway adds host.docker.internal pointing at the host.
	HostGateway bool
	// Binary is the docker CLI; "docker" when empty.
	Binary string
	// Local runs the docker CLI (workdirs, timeouts, process groups).
	Local Local
}

// Remote implements Remote.
func (*Docker) Remote() bool { return true }

// Run runs the harness in a container and removes it afterwards.
func (d *Docker) Run(ctx context.Context, spec Spec) (Result, error) {
	if len(spec.Command) == 0 {
		return Result{}, errors.New("run harness: empty command")
	}
	if d.Image == "" {
		return Result{}, errors.New("run harness: docker runtime has no image")
	}
	name := containerName(spec.Key)
	spec.Command = d.Argv(name, spec.Command)
	// The CLI dies with the worker, but its container would not: the
	// supervisor removes it when the worker dies first.
	res, err := d.Local.runWith(ctx, spec, []string{d.binary(), "rm", "-f", name})
	if err != nil || res.TimedOut {
		// The CLI may die before its container (SIGKILL after the grace).
		rm, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = exec.CommandContext(rm, d.binary(), "rm", "-f", name).Run()
	}
	return res, err
}

// Argv is the command line that runs command in a container called name.
// The workdir is the CLI's working directory, mounted at the same path.
func (d *Docker) Argv(name string, command []string) []string {
	// sh expands $PWD: the workdir exists only once Local made it.
	script := `n="$1"; shift; exec "$0" run --rm -i --init --name "$n" -v "$PWD:$PWD" -w "$PWD"`
	for _, v := range ContractEnv {
		script += " -e " + v
	}
	if d.Network != "" {
		script += " --network " + shellQuote(d.Network)
	}
	if d.HostGateway {
		script += " --add-host host.docker.internal:host-gateway"
	}
	script += " " + shellQuote(d.Image) + ` "$@"`
	return append([]string{"sh", "-c", script, d.binary(), name}, command...)
}

func (d *Docker) binary() string {
	if d.Binary == "" {
		return "docker"
	}
	return d.Binary
}

// containerName is a valid, unique container name for a rollout key.
func containerName(key string) string {
	var b strings.Builder
	b.WriteString("evalflow-")
	for _, r := range key {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	id := make([]byte, 3)
	_, _ = rand.Read(id)
	b.WriteString("-" + hex.EncodeToString(id))
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
