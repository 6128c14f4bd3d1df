package harness

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

var (
	_ Remote      = (*Docker)(nil)
	_ ImageRunner = (*Docker)(nil)
)

// ContractEnv names the variables of the harness contract (see Env) that a
// container is given.
var ContractEnv = []string{
	"OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL",
	"ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_MODEL",
	"EVALFLOW_TASK_FILE", "EVALFLOW_PROMPT", "EVALFLOW_ANSWER_FILE", "EVALFLOW_MAX_TURNS", "EVALFLOW_WORKDIR",
	"EVALFLOW_WORKSPACE", "EVALFLOW_LOGS", "EVALFLOW_SOLUTION",
}

// Docker runs each harness in a fresh container of Image, its workdir mounted
// at the same path, with the contract variables (values are passed through
// the docker CLI's environment, never its arguments). A rollout with a
// workspace runs in the task's own image instead ([environment]
// docker_image, or a build of its Dockerfile cached by a hash of its
// environment directory), which must hold the harness command, with the
// workspace at /app and its logs at /logs; its verifier runs in the same
// image with the tests at /tests. A container has its
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

	builds sync.Mutex // one image build at a time
}

// Remote implements Remote.
func (*Docker) Remote() bool { return true }

// RunsTaskImages implements ImageRunner: a task runs in its
// [environment] docker_image or a build of its Dockerfile.
func (*Docker) RunsTaskImages() bool { return true }

// Run runs the harness in a container and removes it afterwards.
func (d *Docker) Run(ctx context.Context, spec Spec) (Result, error) {
	if len(spec.Command) == 0 {
		return Result{}, errors.New("run harness: empty command")
	}
	if d.Image == "" {
		return Result{}, errors.New("run harness: docker runtime has no image")
	}
	if spec.Workspace != nil {
		return d.runInWorkspace(ctx, spec)
	}
	name := containerName(spec.Key)
	spec.Command = d.Argv(name, spec.Command)
	// The CLI dies with the worker, but its container would not: the
	// supervisor removes it when the worker dies first.
	res, err := d.Local.runWith(ctx, spec, d.rmCommand(name))
	if err != nil || res.TimedOut {
		d.remove(name)
	}
	return res, err
}

func (d *Docker) rmCommand(name string) []string { return []string{d.binary(), "rm", "-f", name} }

// remove removes container name: the CLI may die before its container
// (SIGKILL after the grace).
func (d *Docker) remove(name string) {
	rm, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = exec.CommandContext(rm, d.binary(), "rm", "-f", name).Run()
}

// runInWorkspace runs the harness in a container of the task's image with
// the workspace mounted at /app (or its WORKDIR) and its logs at /logs.
// The task's image must hold the harness command.
func (d *Docker) runInWorkspace(ctx context.Context, spec Spec) (Result, error) {
	ws := spec.Workspace
	image, err := d.imageFor(ctx, ws)
	if err != nil {
		return Result{}, err
	}
	files, err := ws.scratch("run")
	if err != nil {
		return Result{}, fmt.Errorf("harness files: %w", err)
	}
	if !d.Local.Keep {
		defer removeAll(files)
	}
	if err := writeTaskFile(files, spec.Task); err != nil {
		return Result{}, err
	}
	extra := []string{"-v", ws.Dir + ":" + ws.Mount(), "-v", ws.Logs + ":" + sandboxLogs, "-w", ws.Workdir()}
	view := envPaths{workdir: ws.Workdir(), files: files, workspace: ws.Mount(), logs: sandboxLogs}
	if spec.Solution != "" {
		extra = append(extra, "-v", spec.Solution+":"+sandboxSolution+":ro")
		view.solution = sandboxSolution
	}
	name := containerName(spec.Key)
	res, err := d.Local.exec(ctx, proc{
		argv: d.argv(name, image, ContractEnv, extra, spec.Command), dir: files,
		env: contractEnv(os.Environ(), spec, view), timeout: spec.Timeout, outputLimit: spec.OutputLimit,
		onOrphan: d.rmCommand(name),
	})
	if err != nil || res.TimedOut {
		d.remove(name)
	}
	if err != nil {
		return res, err
	}
	res.Answer = readAnswer(filepath.Join(files, AnswerFile))
	return res, nil
}

// Verify runs the verifier in a container of the task's image, the
// workspace at /app, its logs at /logs and the tests read-only at /tests.
func (d *Docker) Verify(ctx context.Context, spec VerifySpec) (VerifyResult, error) {
	ws, err := checkVerifySpec(spec)
	if err != nil {
		return VerifyResult{}, err
	}
	image, err := d.imageFor(ctx, ws)
	if err != nil {
		return VerifyResult{}, err
	}
	logs, err := resetVerifierLogs(ws)
	if err != nil {
		return VerifyResult{}, err
	}
	extra := []string{"-v", ws.Dir + ":" + ws.Mount(), "-v", ws.Logs + ":" + sandboxLogs, "-w", ws.Workdir()}
	paths := verifierPaths{workspace: ws.Mount(), logs: sandboxLogs, verifierLogs: sandboxLogs + "/" + VerifierLogs}
	if spec.Tests != "" {
		extra = append(extra, "-v", spec.Tests+":"+sandboxTests+":ro")
		paths.tests = sandboxTests
	}
	names := []string{"EVALFLOW_WORKSPACE", "EVALFLOW_LOGS", "EVALFLOW_VERIFIER_LOGS", "EVALFLOW_TESTS"}
	for k := range spec.Env {
		names = append(names, k)
	}
	sort.Strings(names[4:])
	name := containerName(spec.Key + "-verify")
	res, err := d.Local.exec(ctx, proc{
		argv: d.argv(name, image, names, extra, []string{"sh", "-c", spec.Command}), dir: logs,
		env: verifierEnv(os.Environ(), spec, paths), timeout: spec.Timeout, outputLimit: spec.OutputLimit,
		onOrphan: d.rmCommand(name),
	})
	if err != nil || res.TimedOut {
		d.remove(name)
	}
	if err != nil {
		return VerifyResult{}, fmt.Errorf("run verifier: %w", err)
	}
	return verdict(res, spec.Timeout, logs)
}

// imageFor is the image a task's workspace runs in: the task's
// [environment] docker_image, else a build of its Dockerfile, else Image.
func (d *Docker) imageFor(ctx context.Context, ws *Workspace) (string, error) {
	switch {
	case ws.image != "":
		return ws.image, nil
	case ws.build != "":
		return d.buildImage(ctx, ws.build)
	case d.Image != "":
		return d.Image, nil
	}
	return "", errors.New("docker runtime: the task names no image and --runtime.docker-image is not set")
}

// buildImage builds the image of a task's environment directory, tagged by
// a hash of its content, unless an image of that tag is there already.
func (d *Docker) buildImage(ctx context.Context, dir string) (string, error) {
	sum, err := hashTree(dir)
	if err != nil {
		return "", fmt.Errorf("hash task environment: %w", err)
	}
	tag := "evalflow-env:" + sum[:16]
	d.builds.Lock()
	defer d.builds.Unlock()
	if exec.CommandContext(ctx, d.binary(), "image", "inspect", tag).Run() == nil {
		return tag, nil
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, d.binary(), "build", "-q", "-t", tag, dir)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("docker build of the task environment: %w: %s", err, shorten(out.String(), 300))
	}
	return tag, nil
}

// hashTree hashes the names, modes, link targets and contents under dir.
func hashTree(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := e.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%o\x00", filepath.ToSlash(rel), fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s\x00", link)
		case fi.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Argv is the command line that runs command in a container called name.
// The workdir is the CLI's working directory, mounted at the same path.
func (d *Docker) Argv(name string, command []string) []string {
	return d.argv(name, d.Image, ContractEnv, nil, command)
}

// argv is the command line that runs command in a container of image
// called name, given the variables env names, with extra arguments of
// docker run (mounts, -w) after the CLI's working directory's mount.
func (d *Docker) argv(name, image string, env, extra, command []string) []string {
	// sh expands $PWD: the workdir exists only once Local made it.
	script := `n="$1"; shift; exec "$0" run --rm -i --init --name "$n" -v "$PWD:$PWD" -w "$PWD"`
	for _, v := range env {
		script += " -e " + shellQuote(v)
	}
	if d.Network != "" {
		script += " --network " + shellQuote(d.Network)
	}
	if d.HostGateway {
		script += " --add-host host.docker.internal:host-gateway"
	}
	for _, a := range extra {
		script += " " + shellQuote(a)
	}
	script += " " + shellQuote(image) + ` "$@"`
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
