package container_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/engine"
	"github.com/evalflow/evalflow/internal/harness/container"
	"github.com/evalflow/evalflow/internal/harness/container/containertest"
	"github.com/evalflow/evalflow/tasksets"
)

// task is the named task of a Harbor taskset directory.
func task(t *testing.T, dir, name string) tasksets.Task {
	t.Helper()
	ts, err := tasksets.OpenHarbor(dir)
	require.NoError(t, err)
	for i := int64(0); i < ts.Len(); i++ {
		task, err := ts.Task(context.Background(), i)
		require.NoError(t, err)
		if task.ID == name {
			return task
		}
	}
	t.Fatalf("no task %s in %s", name, dir)
	return tasksets.Task{}
}

// attempt runs one rollout attempt as the worker does: the harness in a
// fresh sandbox, then the verifier beside it, then the workspace (and the
// sandbox) removed.
func attempt(t *testing.T, r *container.Runtime, task tasksets.Task, command []string, solution string) (harness.Result, harness.VerifyResult, error) {
	t.Helper()
	return tryAttempt(r, task, command, solution)
}

// tryAttempt is attempt for any goroutine: its failures are returned.
func tryAttempt(r *container.Runtime, task tasksets.Task, command []string, solution string) (_ harness.Result, _ harness.VerifyResult, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ws, err := r.PrepareWorkspace("", task)
	if err != nil {
		return harness.Result{}, harness.VerifyResult{}, err
	}
	defer func() {
		if rerr := ws.Remove(); err == nil {
			err = rerr
		}
	}()
	res, err := r.Run(ctx, harness.Spec{
		Key: "run-" + task.ID + "/0/0/0", Command: command, BaseURL: "http://127.0.0.1:9", Secret: "s3cret",
		Task: task, Timeout: task.AgentTimeout, Workspace: ws, Solution: solution,
	})
	if err != nil || res.TimedOut || res.OOMKilled {
		return res, harness.VerifyResult{}, err
	}
	v, err := r.Verify(ctx, harness.VerifySpec{
		Key: task.ID, Workspace: ws, Tests: task.Tests, Command: task.Verify, Env: task.VerifierEnv, Timeout: task.VerifierTimeout,
	})
	return res, v, err
}

// Tasks shaped like Terminal-Bench's and the bundled sample: the oracle
// scores 1 and an agent that does nothing 0, each in a sandbox of the
// task's own image with the verifier in the same sandbox.
func TestOracleAndNothingInTheTasksImage(t *testing.T) {
	r := containertest.Runtime(t)
	sample, err := filepath.Abs("../../../tasksets/data/harbor-sample")
	require.NoError(t, err)
	cases := []struct{ dir, name string }{
		{"testdata/tb-shaped", "apt-tool"},
		{"testdata/tb-shaped", "state-outside-app"},
		{"testdata/tb-shaped", "quoted-copy"},
	}
	for _, name := range []string{"config-edit", "fix-fizzbuzz", "hello-file", "ini-to-json", "log-errors", "release-bundle", "rename-photos", "sales-report"} {
		cases = append(cases, struct{ dir, name string }{sample, name})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tk := task(t, c.dir, c.name)
			res, v, err := attempt(t, r, tk, harness.OracleCommand(), tk.Solution)
			require.NoError(t, err, "oracle: harness %+v", res)
			assert.Zero(t, res.ExitCode, "oracle: %s", res.Stderr)
			assert.Equal(t, 1.0, v.Reward, "oracle: verifier said %s %s", v.Stdout, v.Stderr)

			res, v, err = attempt(t, r, tk, []string{"true"}, "")
			require.NoError(t, err)
			assert.Zero(t, res.ExitCode)
			assert.Equal(t, 0.0, v.Reward, "nothing done: verifier said %s %s", v.Stdout, v.Stderr)
		})
	}
}

// The agent's sandbox holds the image's files, not the build context's:
// what a RUN line removed stays removed, and the tests are not there
// before the verifier.
func TestTheAgentSeesTheImageNotTheContext(t *testing.T) {
	r := containertest.Runtime(t)
	tk := task(t, "testdata/tb-shaped", "quoted-copy")
	res, _, err := attempt(t, r, tk, []string{"sh", "-c", `ls -A /app; test -e /tests && echo TESTS; echo "wd=$PWD ws=$EVALFLOW_WORKSPACE key=${OPENAI_API_KEY}"; env | grep -c OPENAI_API_KEY; env | grep -q HOME=/root && echo home`}, "")
	require.NoError(t, err)
	assert.Equal(t, "greeting.txt\nnotes.txt\nreport.txt\nwd=/app ws=/app key=s3cret\n1\nhome\n", res.Stdout)
}

func TestWorkerSecretsStayOut(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-worker-real-key")
	t.Setenv("SOME_TOKEN", "worker-token")
	r := containertest.Runtime(t)
	tk := task(t, "testdata/tb-shaped", "state-outside-app")
	res, _, err := attempt(t, r, tk, []string{"env"}, "")
	require.NoError(t, err)
	assert.NotContains(t, res.Stdout, "sk-worker-real-key")
	assert.NotContains(t, res.Stdout, "worker-token")
}

// A task over its memory_mb is killed by the kernel, and the result says
// so: the agent's failure, not the infrastructure's.
func TestMemoryLimitIsTheAgents(t *testing.T) {
	r := containertest.Runtime(t)
	tk := task(t, "testdata/tb-shaped", "memory-hog")
	res, _, err := attempt(t, r, tk, harness.OracleCommand(), tk.Solution)
	require.NoError(t, err)
	assert.True(t, res.OOMKilled, "exit %d, stderr %s", res.ExitCode, res.Stderr)

	// The same command well within the limit is not.
	res, _, err = attempt(t, r, tk, []string{"sh", "-c", "head -c 1M /dev/zero | tail -c 1 | wc -c"}, "")
	require.NoError(t, err)
	assert.False(t, res.OOMKilled)
	assert.Zero(t, res.ExitCode)
}

// A harness over its timeout ends with its sandbox; a cancelled one too.
func TestTimeoutEndsTheSandbox(t *testing.T) {
	r := containertest.Runtime(t)
	tk := task(t, "testdata/tb-shaped", "state-outside-app")
	ws, err := r.PrepareWorkspace("", tk)
	require.NoError(t, err)
	defer ws.Remove()
	res, err := r.Run(context.Background(), harness.Spec{Key: "timeout/0/0/0", Command: []string{"sleep", "60"}, BaseURL: "http://127.0.0.1:9", Task: tk, Workspace: ws, Timeout: 2 * time.Second})
	require.NoError(t, err)
	assert.True(t, res.TimedOut)
	assert.Nil(t, ws.Sandbox(), "the sandbox went with the timed-out harness")
	left, err := r.Engine.ListContainers(context.Background(), container.LabelRun+"=timeout")
	require.NoError(t, err)
	assert.Empty(t, left)

	_, err = r.Verify(context.Background(), harness.VerifySpec{Key: "timeout", Workspace: ws, Command: "true"})
	assert.ErrorContains(t, err, "sandbox is gone")
}

// A Dockerfile that does not build is a configuration error naming the
// task, shown by Prepare before any rollout.
func TestBrokenDockerfileIsTheTasks(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "broken", "environment"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "broken", "environment", "Dockerfile"), []byte("FROM debian:bookworm-slim\nRUN echo boom && exit 4\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "broken", "instruction.md"), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "broken", "task.toml"), []byte("version = \"1.0\"\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "broken", "tests"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "broken", "tests", "test.sh"), []byte("exit 0\n"), 0o755))
	tk := task(t, dir, "broken")
	r := containertest.Runtime(t)
	err := r.Prepare(context.Background(), tk)
	var ce *harness.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "task broken")
	assert.Contains(t, err.Error(), "does not build")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "broken", "environment", "docker-compose.yaml"), []byte("services: {}\n"), 0o644))
	err = r.Prepare(context.Background(), tk)
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "service main: task broken", "a compose task's agent's service is built from its Dockerfile")
	assert.Contains(t, err.Error(), "does not build")

	tk.Info = []byte(`{"environment":{"gpus":1}}`)
	tk.Environment = ""
	_, err = r.Run(context.Background(), harness.Spec{Key: "gpu/0/0/0", Command: []string{"true"}, Task: tk})
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "GPU")
}

// Sandboxes a dead worker of this host left are removed; a live worker's
// are not.
func TestRemoveOrphans(t *testing.T) {
	r := containertest.Runtime(t)
	ctx := context.Background()
	host, _ := os.Hostname()
	mk := func(pid string) string {
		id, err := r.Engine.CreateContainer(ctx, engine.ContainerConfig{
			Image: "docker.io/library/debian:bookworm-slim", Cmd: []string{"sleep", "600"},
			Labels:     map[string]string{"evalflow.sandbox": "rollout", "evalflow.host": host, "evalflow.pid": pid, "evalflow.run": "orphans"},
			HostConfig: engine.HostConfig{NetworkMode: "none"},
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = r.Engine.RemoveContainer(ctx, id) })
		require.NoError(t, r.Engine.StartContainer(ctx, id))
		return id
	}
	dead := mk("2147483000")
	live := mk(fmt.Sprint(os.Getppid()))
	n, err := r.RemoveOrphans(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, n, 1)
	_, err = r.Engine.InspectContainer(ctx, dead)
	assert.True(t, engine.IsNotFound(err), "the dead worker's sandbox is removed")
	_, err = r.Engine.InspectContainer(ctx, live)
	assert.NoError(t, err, "a live worker's sandbox stays")
}

// A sandbox that goes away under a running harness (its engine lost it,
// or someone removed it) is the runtime's error, retried as
// infrastructure, never a result scored as the agent's.
func TestSandboxGoneMidRunIsTheRuntimes(t *testing.T) {
	r := containertest.Runtime(t)
	tk := task(t, "testdata/tb-shaped", "state-outside-app")
	ws, err := r.PrepareWorkspace("", tk)
	require.NoError(t, err)
	defer ws.Remove()
	ctx := context.Background()
	type ran struct {
		res harness.Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := r.Run(ctx, harness.Spec{Key: "gone/0/0/0", Command: []string{"sh", "-c", "touch /app/started; sleep 120"}, BaseURL: "http://127.0.0.1:9", Task: tk, Workspace: ws, Timeout: 5 * time.Minute})
		done <- ran{res, err}
	}()
	var id string
	require.Eventually(t, func() bool {
		list, err := r.Engine.ListContainers(ctx, container.LabelRun+"=gone")
		require.NoError(t, err)
		if len(list) != 1 {
			return false
		}
		id = list[0].ID
		code, err := r.Engine.Exec(ctx, id, engine.ExecConfig{Cmd: []string{"test", "-e", "/app/started"}}, nil, nil)
		return err == nil && code == 0
	}, 2*time.Minute, 50*time.Millisecond, "the harness starts in its sandbox")
	require.NoError(t, r.Engine.RemoveContainer(ctx, id))
	got := <-done
	require.Error(t, got.err, "a lost sandbox is an error, not a result: %+v", got.res)
	assert.Contains(t, got.err.Error(), "keeper went away")
}

// A workspace deep in the file system still gets its sandbox: the run
// files, whose unix sockets have short paths, go to a directory of their
// own, removed with the sandbox.
func TestDeepWorkspace(t *testing.T) {
	r := containertest.Runtime(t)
	r.Dir = filepath.Join(t.TempDir(), strings.Repeat("d", 90))
	require.NoError(t, os.MkdirAll(r.Dir, 0o755))
	tk := task(t, "testdata/tb-shaped", "state-outside-app")
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "evalflow-run-*"))
	res, v, err := attempt(t, r, tk, harness.OracleCommand(), tk.Solution)
	require.NoError(t, err)
	assert.Zero(t, res.ExitCode, res.Stderr)
	assert.Equal(t, 1.0, v.Reward)
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "evalflow-run-*"))
	assert.Equal(t, len(before), len(after), "the run directory went with the sandbox")
}

// A sandbox lives no longer than its hard lifetime: its keeper ends it,
// and the engine removes it, with the worker still waiting on its harness.
func TestHardLifetimeEndsTheSandbox(t *testing.T) {
	r := containertest.Runtime(t)
	r.MaxLifetime = 3 * time.Second
	tk := task(t, "testdata/tb-shaped", "state-outside-app")
	ws, err := r.PrepareWorkspace("", tk)
	require.NoError(t, err)
	defer ws.Remove()
	start := time.Now()
	_, err = r.Run(context.Background(), harness.Spec{Key: "lifetime/0/0/0", Command: []string{"sleep", "600"}, BaseURL: "http://127.0.0.1:9", Task: tk, Workspace: ws, Timeout: 10 * time.Minute})
	require.Error(t, err, "a sandbox ended under its harness is the runtime's error, retried")
	assert.Less(t, time.Since(start), 2*time.Minute, "ended at its lifetime, not the harness's timeout")
	require.Eventually(t, func() bool {
		left, err := r.Engine.ListContainers(context.Background(), container.LabelRun+"=lifetime")
		require.NoError(t, err)
		return len(left) == 0
	}, time.Minute, 100*time.Millisecond, "the engine removed the ended sandbox")
}

// A task's cpus are the sandbox's CPU quota, as its cgroup says.
func TestCPUsAreApplied(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "half", "environment", "Dockerfile")
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte("FROM debian:bookworm-slim\nWORKDIR /app\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "half", "instruction.md"), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "half", "task.toml"), []byte("version = \"1.0\"\n[environment]\ncpus = 0.5\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "half", "tests"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "half", "tests", "test.sh"), []byte("exit 0\n"), 0o755))
	tk := task(t, dir, "half")
	r := containertest.Runtime(t)
	ws, err := r.PrepareWorkspace("", tk)
	require.NoError(t, err)
	defer ws.Remove()
	// cgroup v2's cpu.max, else v1's quota and period.
	res, err := r.Run(context.Background(), harness.Spec{Key: "half/0/0/0", BaseURL: "http://127.0.0.1:9", Task: tk, Workspace: ws, Timeout: time.Minute,
		Command: []string{"sh", "-c", `cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo "$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)"`}})
	require.NoError(t, err)
	require.Zero(t, res.ExitCode, res.Stderr)
	var quota, period float64
	_, err = fmt.Sscanf(res.Stdout, "%g %g", &quota, &period)
	require.NoError(t, err, "cgroup said %q", res.Stdout)
	assert.InDelta(t, 0.5, quota/period, 0.01, "cgroup said %q", res.Stdout)
}

// Task images are kept within a bound: the most recent, those in use and
// those built within the grace stay; prune removes the rest.
func TestPruneTaskImages(t *testing.T) {
	r := containertest.Runtime(t)
	repo := fmt.Sprintf("localhost/evalflow-test-prune-%d", time.Now().UnixNano())
	container.SetImageRepo(r, repo)
	ctx := context.Background()
	dir := t.TempDir()
	var names []string
	for _, id := range []string{"a", "b", "c"} {
		env := filepath.Join(dir, id)
		require.NoError(t, os.MkdirAll(env, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(env, "Dockerfile"), []byte("FROM debian:bookworm-slim\nLABEL task="+id+"\n"), 0o644))
		require.NoError(t, r.Prepare(ctx, tasksets.Task{ID: "prune-" + id, Environment: env}))
	}
	imgs, err := r.TaskImages(ctx)
	require.NoError(t, err)
	require.Len(t, imgs, 3)
	for _, img := range imgs {
		names = append(names, img.Name)
		assert.True(t, strings.HasPrefix(img.Name, repo+"/prune-"), img.Name)
		assert.Positive(t, img.Size)
	}
	t.Cleanup(func() {
		for _, n := range names {
			_ = r.Engine.RemoveImage(context.Background(), n)
		}
	})

	removed, err := r.PruneImages(ctx, 1, 0)
	require.NoError(t, err)
	assert.Empty(t, removed, "images built within the grace stay")

	// One in use by a container stays whatever its age.
	id, err := r.Engine.CreateContainer(ctx, engine.ContainerConfig{Image: imgs[2].Name, Cmd: []string{"true"}, HostConfig: engine.HostConfig{NetworkMode: "none"}})
	require.NoError(t, err)
	defer r.Engine.RemoveContainer(ctx, id)
	removed, err = r.PruneImages(ctx, 1, time.Nanosecond)
	require.NoError(t, err)
	require.Len(t, removed, 2)
	left, err := r.TaskImages(ctx)
	require.NoError(t, err)
	require.Len(t, left, 1)
	assert.Equal(t, imgs[2].Name, left[0].Name, "the image in use is kept")
	assert.True(t, left[0].InUse)
}
