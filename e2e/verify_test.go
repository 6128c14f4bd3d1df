package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/activities"
	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/tasksets"
	"github.com/evalflow/evalflow/trace"
	"github.com/evalflow/evalflow/workflows"
)

// harborRun is one eval of a Harbor taskset on the embedded server.
type harborRun struct {
	taskset string
	runtime harness.Runtime // nil: local subprocesses
	harness rollout.HarnessConfig
	script  string // the mock model's script; "" answers arithmetic
	rubric  string // the run's rubric; "" is the default
	// maxAttempts of each rollout; 0 is the default.
	maxAttempts int
	// skipUnsupported is the worker's --runtime.skip-unsupported.
	skipUnsupported bool
	// mayFail keeps the workflow's error in harborResult.err rather than
	// failing the test.
	mayFail bool
}

// harborResult is what a harborRun left: the workflow's result, the
// stored records by task id, the run's directory, its scheduled activities
// by name, and the parent of its workspaces.
type harborResult struct {
	res       workflows.Result
	records   map[string]results.Record
	runDir    string
	scheduled map[string]int
	workDir   string
	err       error // the workflow's, with harborRun.mayFail
}

func runHarbor(t *testing.T, r harborRun) harborResult {
	t.Helper()
	_, c := devtest.StartEvalflow(t)
	runsDir, workDir := t.TempDir(), t.TempDir()
	rt := r.runtime
	if rt == nil {
		rt = &local.Runtime{Dir: workDir}
	}
	startWorker(t, c, wiring.Config{
		TaskQueue: "harbor", RunsDir: runsDir, MaxRollouts: 4, Multiplex: 4,
		Runtime: rt, WorkDir: workDir, SkipUnsupported: r.skipUnsupported,
		Mock: mock.Config{Script: r.script},
	})

	runID := "harbor-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	cfg := workflows.RunConfig{
		RunID: runID, Taskset: r.taskset, MaxConcurrent: 4, Model: "mock", Rubric: r.rubric,
		Harness: r.harness, Limits: workflows.Limits{MaxAttempts: r.maxAttempts},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: runID, TaskQueue: "harbor"}, wiring.EvalWorkflowName, workflows.EvalInput{Config: cfg})
	require.NoError(t, err)
	out := harborResult{records: map[string]results.Record{}, workDir: workDir}
	out.err = run.Get(ctx, &out.res)
	if !r.mayFail {
		require.NoError(t, out.err)
	}
	out.scheduled = scheduledActivities(t, c, runID, run.GetRunID())
	store := storetest.Files(t, runsDir)
	out.runDir = store.Dir(runID)
	for _, rec := range mustList(t, store, runID) {
		_, dup := out.records[rec.TaskID]
		require.False(t, dup, "task %s stored twice", rec.TaskID)
		out.records[rec.TaskID] = rec
	}
	return out
}

// scheduledActivities counts the activities a workflow scheduled, by name.
func scheduledActivities(t *testing.T, c client.Client, id, runID string) map[string]int {
	t.Helper()
	n := map[string]int{}
	it := c.GetWorkflowHistory(context.Background(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			n[a.GetActivityType().GetName()]++
		}
	}
	return n
}

// readTrace reads a record's trace.
func readTrace(t *testing.T, runDir string, rec results.Record) trace.Rollout {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, rec.Trace))
	require.NoError(t, err)
	var tr trace.Rollout
	require.NoError(t, json.Unmarshal(b, &tr))
	return tr
}

// requireNoWorkspaceLeft fails when a workspace is left under dir.
func requireNoWorkspaceLeft(t *testing.T, dir string) {
	t.Helper()
	left, err := filepath.Glob(filepath.Join(dir, "evalflow-ws-*"))
	require.NoError(t, err)
	require.Empty(t, left, "every workspace is removed once verified")
}

func harborSampleLen(t *testing.T) int {
	ts, err := tasksets.HarborSample()
	require.NoError(t, err)
	return int(ts.Len())
}

// TestHarborSampleOracle: the bundled task directories with the oracle
// harness all score 1, each verified by its own Verify activity, with the
// verifier's named numbers stored as metrics.
func TestHarborSampleOracle(t *testing.T) {
	t.Parallel()
	n := harborSampleLen(t)
	got := runHarbor(t, harborRun{taskset: tasksets.HarborSampleName, harness: rollout.HarnessConfig{Oracle: true}})

	require.Zero(t, got.res.Failed, "%+v", got.res.FailedSamples)
	require.Len(t, got.records, n)
	for id, rec := range got.records {
		assert.Equal(t, 1.0, rec.Reward, "%s with its solution", id)
		assert.Equal(t, 1.0, rec.Metrics[activities.TestsMetric], "%s: the tests metric", id)
		tr := readTrace(t, got.runDir, rec)
		require.NotNil(t, tr.Verifier, "%s: the trace holds the verifier's run", id)
		assert.Empty(t, tr.Verifier.Error)
	}
	assert.Equal(t, map[string]float64{"tests": 1, "tests.copied": 1, "tests.manifest": 1, "tests.archive": 1},
		got.records["release-bundle"].Metrics, "reward.json's named numbers")
	assert.Equal(t, n, got.scheduled[rollout.ActivityVerify], "one Verify per rollout, in the history")
	requireNoWorkspaceLeft(t, got.workDir)
}

// TestHarborSampleDoNothing: a harness that does nothing scores 0 on every
// task, as a result (status ok), not an error.
// A rubric naming tests combines the verifier's verdict with its other
// parts: every part, and the verifier's own named numbers, a metric.
func TestHarborSampleVerifierInARubric(t *testing.T) {
	t.Parallel()
	got := runHarbor(t, harborRun{
		taskset: tasksets.HarborSampleName, harness: rollout.HarnessConfig{Oracle: true},
		rubric: "tests*0.8+(command:echo 0.5)*0.2",
	})

	require.Zero(t, got.res.Failed, "%+v", got.res.FailedSamples)
	require.Len(t, got.records, harborSampleLen(t))
	for id, rec := range got.records {
		assert.InDelta(t, 0.9, rec.Reward, 1e-9, "%s: 0.8 × tests 1 + 0.2 × command 0.5", id)
		assert.Equal(t, 1.0, rec.Metrics["tests"], id)
		assert.Equal(t, 0.5, rec.Metrics["command"], id)
	}
	assert.Equal(t, map[string]float64{"tests": 1, "tests.copied": 1, "tests.manifest": 1, "tests.archive": 1, "command": 0.5},
		got.records["release-bundle"].Metrics, "reward.json's named numbers under the tests part")
	requireNoWorkspaceLeft(t, got.workDir)
}

func TestHarborSampleDoNothing(t *testing.T) {
	t.Parallel()
	n := harborSampleLen(t)
	got := runHarbor(t, harborRun{taskset: tasksets.HarborSampleName, harness: rollout.HarnessConfig{Command: []string{"true"}}})

	require.Zero(t, got.res.Failed, "%+v", got.res.FailedSamples)
	require.Len(t, got.records, n)
	for id, rec := range got.records {
		assert.Equal(t, rollout.StatusOK, rec.Status, id)
		assert.Equal(t, 0.0, rec.Reward, "%s with nothing done", id)
	}
	requireNoWorkspaceLeft(t, got.workDir)
}

// TestHarborSampleScriptedAgent: the built-in agent, driven by a scripted
// mock model, makes real tool calls in real workspaces: the tasks the
// script solves score 1, the one it deliberately fails and those it has no
// script for score 0.
func TestHarborSampleScriptedAgent(t *testing.T) {
	t.Parallel()
	script, err := filepath.Abs("testdata/harbor-agent.jsonl")
	require.NoError(t, err)
	got := runHarbor(t, harborRun{taskset: tasksets.HarborSampleName, script: script})

	assertScriptedOutcome(t, got)
	fizz := readTrace(t, got.runDir, got.records["fix-fizzbuzz"])
	require.NotEmpty(t, fizz.Turns)
	assert.Equal(t, "shell", fizz.Turns[0].Response.Message.ToolCalls[0].Name, "the agent acted, and failed")
	require.NotNil(t, fizz.Verifier)
	assert.Equal(t, 0.0, fizz.Verifier.Reward)
	requireNoWorkspaceLeft(t, got.workDir)
}

// assertScriptedOutcome checks a run of the bundled sample by the built-in
// agent on testdata/harbor-agent.jsonl: the three tasks the script solves
// score 1, the others 0, and hello-file's turns are its tool calls.
func assertScriptedOutcome(t *testing.T, got harborResult) {
	t.Helper()
	require.Zero(t, got.res.Failed, "%+v", got.res.FailedSamples)
	require.Len(t, got.records, harborSampleLen(t))
	solved := map[string]bool{"hello-file": true, "config-edit": true, "log-errors": true}
	for id, rec := range got.records {
		want := 0.0
		if solved[id] {
			want = 1
		}
		assert.Equal(t, want, rec.Reward, "%s: the scripted outcome", id)
	}
	tr := readTrace(t, got.runDir, got.records["hello-file"])
	require.Len(t, tr.Turns, 3, "write_file, shell, then the answer")
	calls := tr.Turns[0].Response.Message.ToolCalls
	require.Len(t, calls, 1)
	assert.Equal(t, "write_file", calls[0].Name)
	assert.Contains(t, string(mustJSON(t, tr.Turns[2].Request)), "Hello, evalflow!", "the shell tool's output went back to the model")
}

// toolResults is the text of the tool results a turn sent the model: those
// of the calls of the turn before it.
func toolResults(turn trace.Turn) string {
	var out []string
	for _, m := range turn.Request.Messages {
		switch m.Role {
		case "assistant":
			out = nil
		case "tool":
			out = append(out, m.Text())
		}
	}
	return strings.Join(out, "\n")
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// TestBwrapAgentCannotSeeTestsOrSolution: in the bwrap runtime an agent
// that looks for /tests and /solution finds neither, and its reads fail;
// the verifier, after it, has the tests.
func TestBwrapAgentCannotSeeTestsOrSolution(t *testing.T) {
	t.Parallel()
	rt := bwrapRuntime(t)
	script, err := filepath.Abs("testdata/harbor-peek.jsonl")
	require.NoError(t, err)
	got := runHarbor(t, harborRun{taskset: tasksets.HarborSampleName, script: script, runtime: rt})

	require.Zero(t, got.res.Failed, "%+v", got.res.FailedSamples)
	rec := got.records["hello-file"]
	tr := readTrace(t, got.runDir, rec)
	require.Len(t, tr.Turns, 3)
	shellOut := toolResults(tr.Turns[1])
	assert.Contains(t, shellOut, "tests-absent", "no /tests during the agent's run")
	assert.Contains(t, shellOut, "solution-absent", "no /solution during the agent's run")
	assert.NotContains(t, shellOut, "TESTS-VISIBLE")
	assert.NotContains(t, shellOut, "SOLUTION-VISIBLE")
	assert.Contains(t, shellOut, "/tests/test.sh: No such file or directory", "reading the tests fails")
	readOut := toolResults(tr.Turns[2])
	assert.Contains(t, readOut, "error: read_file: /tests/test.sh does not exist", "read_file of the tests fails")
	assert.NotContains(t, readOut, "writes the reward")
	assert.Equal(t, 0.0, rec.Reward, "the agent wrote nothing; the verifier, with the tests, says so")
	require.NotNil(t, tr.Verifier)
	assert.Contains(t, tr.Verifier.Stdout, "hello.txt is missing or wrong", "the verifier ran its tests")
	requireNoWorkspaceLeft(t, rt.Local.Dir)
}

// writeTask writes a Harbor task directory whose verifier is test.
func writeTask(t *testing.T, root, name, test string, verifierTimeout float64) {
	t.Helper()
	dir := filepath.Join(root, name)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "tests"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "environment"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "instruction.md"), []byte("Task "+name+": do nothing.\n"), 0o644))
	toml := "version = \"1.0\"\n\n[verifier]\ntimeout_sec = " + strconvF(verifierTimeout) + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "task.toml"), []byte(toml), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tests", "test.sh"), []byte("#!/bin/bash\n"+test+"\n"), 0o755))
}

func strconvF(f float64) string { b, _ := json.Marshal(f); return string(b) }

// TestBrokenVerifiersAreVerifierErrors: a verifier that hangs is killed at
// its timeout and one that writes garbage to reward.txt gets a clear error;
// both are retried, then recorded as the verifier's errors — never a
// reward of 0 for the agent — with each attempt's trace kept.
func TestBrokenVerifiersAreVerifierErrors(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeTask(t, root, "hangs", "echo about to hang; sleep 1000", 1)
	writeTask(t, root, "garbage", `echo abc > "${EVALFLOW_VERIFIER_LOGS:-/logs/verifier}/reward.txt"`, 30)
	start := time.Now()
	got := runHarbor(t, harborRun{taskset: "harbor:" + root, harness: rollout.HarnessConfig{Command: []string{"true"}}, maxAttempts: 2})

	assert.Less(t, time.Since(start), 2*time.Minute, "the hanging verifier is killed at its timeout")
	assert.Empty(t, got.records, "no reward is stored for a verifier that gave none")
	assert.Equal(t, int64(2), got.res.Failed)
	require.Len(t, got.res.Errors, 1)
	assert.Equal(t, workflows.KindCount{Kind: rollout.KindVerifier, Count: 2}, got.res.Errors[0])
	errs := map[string]string{}
	for _, f := range got.res.FailedSamples {
		errs[f.Key] = f.Error
	}
	var all []string
	for _, e := range errs {
		all = append(all, e)
	}
	joined := strings.Join(all, "\n")
	assert.Contains(t, joined, "task hangs: the verifier timed out after 1s")
	assert.Contains(t, joined, `task garbage: the verifier reward.txt: "abc" is not a number`)
	assert.Equal(t, 4, got.scheduled[rollout.ActivityVerify], "each verifier retried once, in the history")

	// Every attempt's trace is kept, with the verifier's output.
	traces, err := filepath.Glob(filepath.Join(got.runDir, "traces", "*", "attempt-*.json"))
	require.NoError(t, err)
	require.Len(t, traces, 4)
	var hung int
	for _, f := range traces {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var tr trace.Rollout
		require.NoError(t, json.Unmarshal(b, &tr))
		require.NotNil(t, tr.Verifier, f)
		assert.NotEmpty(t, tr.Verifier.Error, f)
		if strings.Contains(tr.Verifier.Error, "timed out") {
			hung++
			assert.Contains(t, tr.Verifier.Stdout, "about to hang")
		}
	}
	assert.Equal(t, 2, hung)
	requireNoWorkspaceLeft(t, got.workDir)
}

// TestRunLinesRefusedUnlessSkipped: under the local runtime a task whose
// Dockerfile has a RUN line is refused at once, recorded as a config
// failure naming the task and the line, without retrying it and without
// ending the run; a worker started with --runtime.skip-unsupported runs
// it, the line noted in its trace.
func TestRunLinesRefusedUnlessSkipped(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeTask(t, root, "needs-jq", `echo 1 > "${EVALFLOW_VERIFIER_LOGS:-/logs/verifier}/reward.txt"`, 30)
	require.NoError(t, os.WriteFile(filepath.Join(root, "needs-jq", "environment", "Dockerfile"),
		[]byte("FROM debian:bookworm-slim\nWORKDIR /app\nRUN apt-get install -y jq\n"), 0o644))
	run := harborRun{taskset: "harbor:" + root, harness: rollout.HarnessConfig{Command: []string{"true"}}, maxAttempts: 3, mayFail: true}

	refused := runHarbor(t, run)
	require.NoError(t, refused.err, "a refused task does not end the run")
	rec, ok := refused.records["needs-jq"]
	require.True(t, ok)
	assert.Equal(t, rollout.KindConfig, rec.ErrorKind)
	assert.Contains(t, rec.Error, "task needs-jq: Dockerfile line 3: RUN apt-get install -y jq")
	assert.Equal(t, 1, refused.scheduled[rollout.ActivityRun], "a refused environment is not retried")
	requireNoWorkspaceLeft(t, refused.workDir)

	run.skipUnsupported = true
	skipped := runHarbor(t, run)
	require.NoError(t, skipped.err)
	rec, ok = skipped.records["needs-jq"]
	require.True(t, ok)
	assert.Equal(t, 1.0, rec.Reward)
	assert.Contains(t, readTrace(t, skipped.runDir, rec).Workspace, "RUN apt-get install -y jq: not run outside docker")
}

// TestHarborTaskUnderLocalIsRefusedAtStart: a Harbor task written as Harbor
// tasks are (its solution writes /app, its tests read /app and write
// /logs/verifier) under the local runtime: the run fails at its start,
// before any rollout, naming the task, the paths it assumes and the
// runtimes that give them; nothing is scored. Under bwrap the same task
// scores 1 with its solution.
func TestHarborTaskUnderLocalIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../internal/harness/hostpaths/testdata/harbor-app")
	require.NoError(t, err)
	run := harborRun{taskset: "harbor:" + root, harness: rollout.HarnessConfig{Oracle: true}, mayFail: true}

	refused := runHarbor(t, run)
	require.Error(t, refused.err, "the run does not start")
	for _, want := range []string{"task hello-app assumes the paths of a sandbox", "solution/solve.sh line 4: /app",
		"the local runtime", "--runtime bwrap", "--runtime docker"} {
		assert.Contains(t, refused.err.Error(), want)
	}
	assert.Zero(t, refused.scheduled[rollout.ActivityAcquire], "no rollout started")
	assert.Zero(t, refused.scheduled[rollout.ActivityRun])
	assert.Empty(t, refused.records, "nothing scored, least of all as the agent's")
	requireNoWorkspaceLeft(t, refused.workDir)

	run.runtime = bwrapRuntime(t)
	got := runHarbor(t, run)
	require.NoError(t, got.err)
	rec, ok := got.records["hello-app"]
	require.True(t, ok)
	assert.Equal(t, 1.0, rec.Reward, "%+v", got.res.FailedSamples)
}
