package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/engine"
	"github.com/evalflow/evalflow/internal/harness/container/keeper"
)

// The verifier of a shared-mode task grades what the agent left, and no
// process of the agent's may touch it: they live on while it runs (a
// service the tests query must still answer), so the verifier runs in a
// container of its own beside the sandbox:
//
//   - its file system is a snapshot of the sandbox's, taken when the
//     harness ended (what the agent installed, changed in /etc or wrote
//     anywhere), so a process the agent left changes nothing it reads;
//   - /tests is a fresh copy of the task's tests mounted over whatever
//     the agent put there, and exists nowhere else;
//   - /logs/verifier, the only place a reward is read from, is a host
//     directory mounted into this container alone;
//   - it joins the sandbox's network namespace, and only that: the
//     agent's services answer on localhost, while its processes see
//     neither the verifier's processes nor their files;
//   - the hooks a test runner loads from outside the tests, which the
//     agent added or changed where they would be picked up (a conftest.py
//     above /tests, a pytest.ini at /, a sitecustomize.py), are removed
//     from the snapshot before the tests run (plantedHooks).
//
// See ARCHITECTURE.md ("The agent is an adversary") for the alternatives
// weighed.

// snapshotRepo names the images that verifiers run from; each is tagged
// with the ID of the sandbox it was taken of.
const snapshotRepo = "localhost/evalflow-snapshot"

// verifierMargin is added to a verifier's timeout for its container's hard
// lifetime.
const verifierMargin = 5 * time.Minute

// verify grades the attempt: in a container of its own beside the
// sandbox, or, for a task that asks for it, in a separate sandbox.
func (sb *sandbox) verify(ctx context.Context, spec harness.VerifySpec) (_ harness.VerifyResult, err error) {
	setup, err := harness.VerifierSetupOf(sb.spec.Task)
	if err != nil {
		return harness.VerifyResult{}, &harness.ConfigError{Err: err}
	}
	if setup.Separate() {
		return sb.verifySeparate(ctx, spec, setup)
	}
	logs, binds, tests, err := sb.verifierMounts(spec)
	if err != nil {
		return harness.VerifyResult{}, err
	}
	snapshot, hooks, err := sb.snapshot(ctx)
	if err != nil {
		return harness.VerifyResult{}, fmt.Errorf("verifier: snapshot the sandbox: %w", err)
	}
	defer func() { _ = sb.r.Engine.RemoveImage(context.Background(), snapshot) }()
	// Deferred after the snapshot's removal, so it runs before it: the
	// container goes, then its image.
	v, err := newBox(sb.ws.Root(), "verify")
	if err != nil {
		return harness.VerifyResult{}, fmt.Errorf("verifier: %w", err)
	}
	defer func() { _ = sb.r.removeBox(context.Background(), &v) }()
	cfg := engine.ContainerConfig{
		Image: snapshot, WorkingDir: sb.workdir, Labels: sb.r.labels(sb.spec, kindVerifier),
		// Root, holding a capability no process of the agent's has: the
		// kernel then refuses them the verifier's /proc entries even were
		// they to share its process namespace.
		User: "0:0",
		HostConfig: engine.HostConfig{
			Binds: binds, NetworkMode: "container:" + sb.id, CapAdd: []string{"SYS_PTRACE"},
		},
	}
	if err := sb.r.launch(ctx, &v, cfg, spec.Timeout+verifierMargin); err != nil {
		return harness.VerifyResult{}, fmt.Errorf("the verifier of %s: %w", spec.Key, err)
	}
	stop := func() { _ = sb.r.removeBox(context.Background(), &v) }
	if len(hooks) > 0 {
		sb.r.logger().Info("removed the test-runner hooks the agent planted before grading", "rollout", spec.Key, "paths", hooks)
		res, err := v.exec(ctx, keeper.Request{Argv: append([]string{"rm", "-rf", "--"}, hooks...)}, time.Minute, 0, stop)
		if err != nil || res.ExitCode != 0 {
			return harness.VerifyResult{}, fmt.Errorf("verifier: remove the hooks the agent planted: %v %s", err, res.Stderr)
		}
	}
	res, err := v.exec(ctx, keeper.Request{
		Argv: []string{"sh", "-c", spec.Command}, Env: verifierEnv(spec, sb.workdir, tests), Dir: sb.workdir,
	}, spec.Timeout, spec.OutputLimit, stop)
	if err != nil {
		return harness.VerifyResult{}, fmt.Errorf("run verifier: %w", err)
	}
	out, err := harness.Verdict(res, spec.Timeout, logs)
	out.RemovedHooks = hooks
	return out, err
}

// snapshot freezes the sandbox, takes its file system as an image and
// the hooks the agent planted in it, and thaws it: one moment, so that no
// process of the agent's adds a hook between the two.
func (sb *sandbox) snapshot(ctx context.Context) (image string, hooks []string, err error) {
	eng := sb.r.Engine
	if err := eng.PauseContainer(ctx, sb.id); err != nil {
		return "", nil, err
	}
	defer func() {
		if uerr := eng.UnpauseContainer(context.Background(), sb.id); uerr != nil && err == nil {
			err = uerr
		}
	}()
	var (
		changes   []engine.Change
		changeErr error
		done      = make(chan struct{})
	)
	go func() {
		defer close(done)
		changes, changeErr = eng.Changes(ctx, sb.id)
	}()
	image, err = eng.Commit(ctx, sb.id, snapshotRepo, sb.id, false)
	<-done
	if err == nil && changeErr != nil {
		err = fmt.Errorf("what the agent changed: %w", changeErr)
	}
	if err != nil {
		if image != "" {
			_ = eng.RemoveImage(context.Background(), image)
		}
		return "", nil, err
	}
	return image, plantedHooks(changes, sb.workdir), nil
}

// Files a test runner loads without being named: pytest's conftest.py
// (from every directory above the tests) and its configuration files
// (from the first directory above the tests that holds one), and
// Python's start-up hooks.
var (
	conftest     = "conftest.py"
	runnerConfig = map[string]bool{"pytest.ini": true, ".pytest.ini": true, "tox.ini": true, "setup.cfg": true, "pyproject.toml": true}
	startupHooks = map[string]bool{"sitecustomize.py": true, "usercustomize.py": true}
)

// plantedHooks are the paths among a sandbox's changes that a test
// runner would load from outside the tests: a conftest.py outside the
// workdir, a runner's configuration in a directory above the workdir or
// the tests, and Python's start-up hooks anywhere. What the agent made in
// its workdir is its work, graded as it is.
func plantedHooks(changes []engine.Change, workdir string) []string {
	above := map[string]bool{"/": true}
	for d := filepath.Dir(filepath.Clean(workdir)); d != "/"; d = filepath.Dir(d) {
		above[d] = true
	}
	within := func(dir, p string) bool {
		rel, err := filepath.Rel(dir, p)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
	}
	var out []string
	for _, c := range changes {
		// What the agent left in /tests is hidden by the task's own.
		if c.Kind == 2 || within(TestsDir, c.Path) {
			continue
		}
		name, dir := filepath.Base(c.Path), filepath.Dir(c.Path)
		switch {
		case startupHooks[name],
			name == conftest && !within(workdir, c.Path),
			runnerConfig[name] && above[dir]:
			out = append(out, c.Path)
		}
	}
	return out
}

// copyTests copies the task's tests to dst, a fresh directory.
func copyTests(src, dst string) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		return err
	}
	// The tests are the verifier's to change (caches, outputs).
	return filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			err = os.Chmod(p, 0o777)
		}
		return err
	})
}

// removeOrphanedSnapshots removes the verifiers' snapshots whose sandbox
// is gone (a worker killed while grading).
func (r *Runtime) removeOrphanedSnapshots(ctx context.Context) error {
	images, err := r.Engine.ListImages(ctx, snapshotRepo)
	if err != nil {
		return fmt.Errorf("list snapshots: %w", err)
	}
	for _, img := range images {
		for _, tag := range img.RepoTags {
			repo, id, ok := strings.Cut(tag, ":")
			if !ok || repo != snapshotRepo {
				continue
			}
			if _, err := r.Engine.InspectContainer(ctx, id); !engine.IsNotFound(err) {
				continue
			}
			if err := r.Engine.RemoveImage(ctx, img.ID); err != nil && !engine.IsNotFound(err) {
				return fmt.Errorf("remove snapshot %s: %w", tag, err)
			}
		}
	}
	return nil
}

var errNoSandbox = errors.New("verify: the rollout's sandbox is gone")

// verifierEnv is the environment of a verifier in a sandbox whose
// workspace is workdir and whose tests are at tests ("" for none).
func verifierEnv(spec harness.VerifySpec, workdir, tests string) []string {
	return harness.VerifierEnv(nil, spec, harness.VerifierPaths{Tests: tests, Workspace: workdir, Logs: LogsDir, VerifierLogs: LogsDir + "/" + harness.VerifierLogs})
}
