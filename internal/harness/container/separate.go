package container

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/engine"
	"github.com/evalflow/evalflow/internal/harness/container/keeper"
	"github.com/evalflow/evalflow/tasksets"
)

// A task with [verifier] environment_mode = "separate" is graded as Harbor
// specifies: in a fresh sandbox of the verifier's own image
// ([verifier.environment] docker_image, else a build of tests/Dockerfile,
// else the task's own image, fresh), with its own network namespace, fed
// only the task's declared artifacts, each copied from the agent's
// sandbox to the same path, and /logs/artifacts, a directory of the host
// both mount. Nothing else of what the agent did is there.

// artifactLimit bounds the artifacts carried to a separate verifier.
const artifactLimit = 1 << 30

var _ harness.TaskChecker = (*Runtime)(nil)

// CheckTask refuses a task whose verifier setup cannot be read.
func (r *Runtime) CheckTask(task tasksets.Task) error {
	if _, err := harness.VerifierSetupOf(task); err != nil {
		return &harness.ConfigError{Err: err}
	}
	return nil
}

// verifySeparate grades the attempt in a fresh sandbox of the verifier's.
func (sb *sandbox) verifySeparate(ctx context.Context, spec harness.VerifySpec, setup harness.VerifierSetup) (harness.VerifyResult, error) {
	r, task := sb.r, sb.spec.Task
	env := harness.Environment{}
	if setup.Environment != nil {
		env = *setup.Environment
	}
	image, err := r.verifierImage(ctx, task, sb.ws, env)
	if err != nil {
		return harness.VerifyResult{}, err
	}
	img, err := r.Engine.InspectImage(ctx, image)
	if err != nil {
		return harness.VerifyResult{}, fmt.Errorf("inspect image %s: %w", image, err)
	}
	workdir := img.Config.WorkingDir
	if workdir == "" || workdir == "/" {
		workdir = DefaultWorkdir
	}
	logs, binds, tests, err := sb.verifierMounts(spec)
	if err != nil {
		return harness.VerifyResult{}, err
	}
	v, err := newBox(sb.ws.Root(), "verify")
	if err != nil {
		return harness.VerifyResult{}, fmt.Errorf("verifier: %w", err)
	}
	defer func() { _ = r.removeBox(context.Background(), &v) }()
	hc, err := r.hostConfig(ctx, env, binds)
	if err != nil {
		return harness.VerifyResult{}, err
	}
	cfg := engine.ContainerConfig{Image: image, WorkingDir: workdir, Labels: r.labels(sb.spec, kindVerifier), HostConfig: hc}
	// The artifacts go in before the verifier's first process.
	if err := r.launchWith(ctx, &v, cfg, spec.Timeout+verifierMargin, func(id string) error {
		return sb.carryArtifacts(ctx, id, setup.Artifacts)
	}); err != nil {
		return harness.VerifyResult{}, fmt.Errorf("the verifier of %s: %w", spec.Key, err)
	}
	if err := r.fence(ctx, v.id, env); err != nil {
		return harness.VerifyResult{}, fmt.Errorf("the verifier of %s: %w", spec.Key, err)
	}
	res, err := v.exec(ctx, keeper.Request{
		Argv: []string{"sh", "-c", spec.Command}, Env: verifierEnv(spec, workdir, tests), Dir: workdir,
	}, spec.Timeout, spec.OutputLimit, func() { _ = r.removeBox(context.Background(), &v) })
	if err != nil {
		return harness.VerifyResult{}, fmt.Errorf("run verifier: %w", err)
	}
	return harness.Verdict(res, spec.Timeout, logs)
}

// verifierImage is a separate verifier's image: [verifier.environment]
// docker_image, else a build of the tests' Dockerfile, else the task's
// own image.
func (r *Runtime) verifierImage(ctx context.Context, task tasksets.Task, ws *harness.Workspace, env harness.Environment) (string, error) {
	switch {
	case env.DockerImage != "":
		return env.DockerImage, r.ensure(ctx, task, env.DockerImage)
	case task.Tests != "" && fileExists(filepath.Join(task.Tests, "Dockerfile")):
		vt := task
		vt.ID = task.ID + "-verifier"
		tag, _, err := r.build(ctx, vt, task.Tests, env)
		return tag, err
	}
	taskEnv, err := harness.EnvironmentOf(task)
	if err != nil {
		return "", &harness.ConfigError{Err: err}
	}
	image, _, err := r.imageFor(ctx, task, ws, taskEnv)
	return image, err
}

// verifierMounts are what every verifier container mounts: its fresh
// reward directory (returned as logs), the agent's logs read-only, the
// artifacts directory the agent's sandbox has too, and a fresh copy of
// the tests at /tests (tests is "" for a task without).
func (sb *sandbox) verifierMounts(spec harness.VerifySpec) (logs string, binds []string, tests string, err error) {
	if logs, err = harness.ResetVerifierLogs(sb.ws); err != nil {
		return "", nil, "", err
	}
	_ = os.Chmod(logs, 0o777)
	binds = []string{
		logs + ":" + LogsDir + "/" + harness.VerifierLogs,
		filepath.Join(sb.ws.Logs, harness.AgentLogs) + ":" + LogsDir + "/" + harness.AgentLogs + ":ro",
		filepath.Join(sb.ws.Logs, harness.ArtifactLogs) + ":" + harness.ArtifactsDir,
	}
	if spec.Tests != "" {
		copied := filepath.Join(sb.ws.Root(), "tests")
		if err := copyTests(spec.Tests, copied); err != nil {
			return "", nil, "", fmt.Errorf("verifier: copy the tests: %w", err)
		}
		tests = TestsDir
		binds = append(binds, copied+":"+TestsDir)
	}
	return logs, binds, tests, nil
}

// carryArtifacts copies each artifact from the agent's sandbox into the
// container id at the same path; one the agent did not make is left out,
// and so is one under /logs/artifacts, which the verifier mounts
// (verifierMounts).
func (sb *sandbox) carryArtifacts(ctx context.Context, id string, artifacts []string) error {
	budget := int64(artifactLimit)
	for _, p := range artifacts {
		if c := path.Clean(p); c == harness.ArtifactsDir || strings.HasPrefix(c, harness.ArtifactsDir+"/") {
			continue
		}
		rc, err := sb.r.Engine.CopyOut(ctx, sb.id, p)
		if engine.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("copy artifact %s out of the agent's sandbox: %w", p, err)
		}
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(reroot(pw, rc, path.Dir(p), &budget)) }()
		err = sb.r.Engine.CopyIn(ctx, id, "/", pr)
		rc.Close()
		pr.Close()
		if err != nil {
			return fmt.Errorf("copy artifact %s into the verifier's sandbox: %w", p, err)
		}
	}
	return nil
}

// errArtifactsTooLarge ends a copy of artifacts past artifactLimit.
var errArtifactsTooLarge = fmt.Errorf("the artifacts are larger than %d MiB", artifactLimit>>20)

// reroot copies the tar stream src to w with every name under dir (an
// absolute directory), the directories above it included, so that it
// unpacks at / to the same paths; budget bounds the bytes of its files.
func reroot(w io.Writer, src io.Reader, dir string, budget *int64) error {
	tw := tar.NewWriter(w)
	prefix := strings.TrimPrefix(path.Clean(dir), "/")
	if prefix != "" {
		parts := strings.Split(prefix, "/")
		for i := range parts {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.Join(parts[:i+1], "/") + "/", Mode: 0o755}); err != nil {
				return err
			}
		}
	}
	tr := tar.NewReader(src)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if prefix != "" {
			h.Name = prefix + "/" + h.Name
		}
		if *budget -= h.Size; *budget < 0 {
			return errArtifactsTooLarge
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	return tw.Close()
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
