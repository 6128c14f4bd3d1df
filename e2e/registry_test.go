package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/gittest"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/run"
	"github.com/evalflow/evalflow/tasksets"
	"github.com/evalflow/evalflow/workflows"
)

// registryTasks is a bare repository with two commits of the Harbor tasks
// tasks/hello and tasks/bye: at the first each verifier writes reward
// first, at the second second. It returns the repository's file:// URL
// and the two commits.
func registryTasks(t *testing.T, first, second string) (string, [2]string) {
	t.Helper()
	tasks := func(reward string) func(string) {
		return func(work string) {
			for _, name := range []string{"hello", "bye"} {
				writeTask(t, filepath.Join(work, "tasks"), name, `echo `+reward+` > "${EVALFLOW_VERIFIER_LOGS:-/logs/verifier}/reward.txt"`, 30)
			}
		}
	}
	url, commits := gittest.Repo(t, tasks(first), tasks(second))
	return url, [2]string(commits)
}

// writeBenchRegistry writes a registry listing bench@1.0 at commit and
// returns its path.
func writeBenchRegistry(t *testing.T, path, url, commit string) {
	t.Helper()
	ds := []tasksets.Dataset{{Name: "bench", Version: "1.0", Description: "two tasks", Tasks: []tasksets.RegistryTask{
		{Name: "hello", GitURL: url, GitCommitID: commit, Path: "tasks/hello"},
		{Name: "bye", GitURL: url, GitCommitID: commit, Path: "tasks/bye"},
	}}}
	b, err := json.Marshal(ds)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// resolveBench resolves bench@1.0 through the registry file, as the
// starter's --taskset bench@1.0 --registry FILE does.
func resolveBench(t *testing.T, registry string) string {
	t.Helper()
	ds, err := tasksets.ReadRegistry(context.Background(), registry)
	require.NoError(t, err)
	l, err := tasksets.Resolve(ds, "bench@1.0")
	require.NoError(t, err)
	return l.Ref()
}

// TestRegistryTasksetRunsAndAResumeRefusesOtherCommits: a run of
// bench@1.0, resolved through a registry file to a commit of a local bare
// repository, fetches its tasks with git on the worker and scores them by
// their tests at that commit. When the registry then names another commit,
// going on with the run (a resume, or an eval with its run id) is refused,
// naming the tasks that changed; the run's own commits are what it keeps.
func TestRegistryTasksetRunsAndAResumeRefusesOtherCommits(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // the worker's git cache
	url, commits := registryTasks(t, "1", "0.25")
	registry := filepath.Join(t.TempDir(), "registry.json")
	writeBenchRegistry(t, registry, url, commits[0])
	ref := resolveBench(t, registry)

	_, c := devtest.StartEvalflow(t)
	runsDir, workDir := t.TempDir(), t.TempDir()
	startWorker(t, c, wiring.Config{
		TaskQueue: "registry", RunsDir: runsDir, MaxRollouts: 2, Multiplex: 2,
		Runtime: &local.Runtime{Dir: workDir}, WorkDir: workDir,
		Mock: mock.Config{},
	})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := workflows.RunConfig{
		RunID: "registry-run", Taskset: ref, MaxConcurrent: 2, Model: "mock",
		Harness: rollout.HarnessConfig{Command: []string{"true"}},
	}
	_, err := run.Start(ctx, c, "registry", cfg)
	require.NoError(t, err)
	var res workflows.Result
	require.NoError(t, c.GetWorkflow(ctx, cfg.RunID, "").Get(ctx, &res))
	assert.Equal(t, int64(2), res.Tasks)
	assert.Zero(t, res.Failed, "%+v", res.FailedSamples)
	store := storetest.Files(t, runsDir)
	recs := mustList(t, store, cfg.RunID)
	require.Len(t, recs, 2)
	for _, rec := range recs {
		assert.Equal(t, 1.0, rec.Reward, "task %s is scored by its tests at commit %s", rec.TaskID, commits[0])
	}
	assert.Equal(t, "bench@1.0", workflows.TasksetName(res.Taskset))

	// The registry moves bench@1.0 to the second commit.
	writeBenchRegistry(t, registry, url, commits[1])
	moved := resolveBench(t, registry)
	require.NotEqual(t, ref, moved)

	settings := func() (run.Settings, error) {
		given := cfg
		given.Taskset = moved
		return run.Settings{Config: given, Given: func(name string) bool { return name == "taskset" }}, nil
	}
	_, err = run.Resume(ctx, c, run.ResumeInput{RunID: cfg.RunID, TaskQueue: "registry", Settings: settings, RetryFailed: true})
	var changed *run.ChangedError
	require.ErrorAs(t, err, &changed, "a resume on other commits is refused")
	assert.Equal(t, []string{"taskset"}, changed.Settings)
	was, ok, err := tasksets.ParseLock(changed.Was.Taskset)
	require.NoError(t, err)
	require.True(t, ok)
	now, ok, err := tasksets.ParseLock(changed.Now.Taskset)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, []string{
		"task hello at commit " + commits[1][:12] + ", was " + commits[0][:12],
		"task bye at commit " + commits[1][:12] + ", was " + commits[0][:12],
	}, tasksets.LockChanges(was, now), "the refusal names the changed tasks")

	// A registry named on resume, no taskset given: the run's dataset is
	// resolved again and found at other commits.
	relock := func() (run.Settings, error) {
		return run.Settings{Retaskset: func(stored string) (string, error) {
			l, ok, err := tasksets.ParseLock(stored)
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, "bench@1.0", l.String())
			return resolveBench(t, registry), nil
		}}, nil
	}
	_, err = run.Resume(ctx, c, run.ResumeInput{RunID: cfg.RunID, TaskQueue: "registry", Settings: relock, RetryFailed: true})
	require.ErrorAs(t, err, &changed, "a resume that finds the registry moved is refused")
	assert.Equal(t, moved, changed.Now.Taskset)

	again := cfg
	again.Taskset, again.RetryFailed = moved, true
	_, err = run.Attach(ctx, c, "registry", again)
	require.ErrorAs(t, err, &changed, "an eval with the run's id on other commits is refused too")

	// Without a taskset given, the run goes on with the commits it carries.
	r, err := run.Resume(ctx, c, run.ResumeInput{RunID: cfg.RunID, TaskQueue: "registry", RetryFailed: true})
	require.NoError(t, err)
	require.NotNil(t, r.Started)
	var res2 workflows.Result
	require.NoError(t, c.GetWorkflow(ctx, cfg.RunID, "").Get(ctx, &res2))
	assert.Equal(t, ref, res2.Taskset)
	assert.Equal(t, int64(2), res2.Reused, "the stored rollouts of the same commits are reused")
}

// TestRegistryTasksetUnreachableIsNotTheAgents: a registry task whose
// repository cannot be reached fails the run at its start with the URL and
// git's message, as an error of the infrastructure, retried; no rollout is
// run or scored.
func TestRegistryTasksetUnreachableIsNotTheAgents(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	url, commits := registryTasks(t, "1", "0.5")
	registry := filepath.Join(t.TempDir(), "registry.json")
	writeBenchRegistry(t, registry, url, commits[0])
	ref := resolveBench(t, registry)
	bare := strings.TrimPrefix(url, "file://")
	require.NoError(t, os.Rename(bare, bare+".moved"))

	got := runHarbor(t, harborRun{taskset: ref, harness: rollout.HarnessConfig{Command: []string{"true"}}, mayFail: true})
	require.Error(t, got.err)
	assert.Contains(t, got.err.Error(), "git fetch "+url)
	assert.Contains(t, got.err.Error(), "does not appear to be a git repository")
	assert.Contains(t, got.err.Error(), rollout.ErrTypeRuntime, "an infrastructure error, not a configuration the agent is blamed for")
	assert.Zero(t, got.scheduled[rollout.ActivityRun])
	assert.Empty(t, got.records)
}

// TestStarterEvalOfARegistryDataset: `starter eval --taskset bench@1.0
// --registry FILE` runs a dataset of a registry file from a local bare
// repository end to end (embedded server, in-process worker, the built-in
// agent on the offline mock, the tasks' tests run by the local runtime);
// when the registry then names another commit, `starter resume` with it
// refuses, naming the tasks.
func TestStarterEvalOfARegistryDataset(t *testing.T) {
	t.Parallel()
	starter := filepath.Join(t.TempDir(), "starter")
	build := exec.Command("go", "build", "-o", starter, "../starter")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build the starter: %s", out)

	url, commits := registryTasks(t, "1", "0.5")
	registry := filepath.Join(t.TempDir(), "registry.json")
	writeBenchRegistry(t, registry, url, commits[0])
	dataDir, runsDir, cache := t.TempDir(), t.TempDir(), t.TempDir()
	// An embedded server of this test's own, on a port no other server has.
	server := []string{"--address", "localhost:" + strconv.Itoa(devtest.FreePort(t)), "--embedded", "--ui-port", "-1", "--viewer-addr", "-1",
		"--runtime", "local", "--data-dir", dataDir, "--runs-dir", runsDir}
	env := append(os.Environ(), "XDG_CACHE_HOME="+cache, "EVALFLOW_REGISTRY=", "EVALFLOW_AGENT="+agentCommand[0])
	starterRun := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, starter, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out2, err := starterRun(append([]string{"eval", "--run-id", "bench-run", "--registry", registry, "--taskset", "bench@1.0"}, server...)...)
	require.NoError(t, err, out2)
	assert.Regexp(t, `taskset\s+bench@1\.0\n`, out2, "the summary names the dataset, not its resolved tasks")
	assert.Regexp(t, `mean reward\s+1\.000`, out2, "both tasks scored by their tests at the first commit")
	store := storetest.Files(t, runsDir)
	recs := mustList(t, store, "bench-run")
	require.Len(t, recs, 2)
	entries, err := os.ReadDir(filepath.Join(cache, "evalflow", "git"))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "one checkout of the one commit, in the worker's cache")

	writeBenchRegistry(t, registry, url, commits[1])
	out3, err := starterRun(append([]string{"resume", "--registry", registry, "--retry-failed"}, append(server, "bench-run")...)...)
	require.Error(t, err, out3)
	assert.Contains(t, out3, "run bench-run was started with other settings (--taskset); taskset bench@1.0 now resolves to other tasks: task hello at commit "+commits[1][:12]+", was "+commits[0][:12])
	assert.Contains(t, out3, "add --force")
}
