package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/export"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/workflows"
)

func TestSplitList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{"", nil, ""},
		{"mock", []string{"mock"}, ""},
		{"a, b ,c", []string{"a", "b", "c"}, ""},
		{`agent,sh -c 'echo 1,2',"x,y"`, []string{"agent", "sh -c 'echo 1,2'", `"x,y"`}, ""},
		{"a,,b", nil, "empty item"},
		{"a,", nil, "empty item"},
		{"a,b,a", nil, `names "a" twice`},
	} {
		got, err := splitList(tc.in)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, "splitList(%q)", tc.in)
			continue
		}
		require.NoError(t, err, "splitList(%q)", tc.in)
		assert.Equal(t, tc.want, got, "splitList(%q)", tc.in)
	}
}

func TestCellNames(t *testing.T) {
	for _, tc := range []struct{ harness, model, want string }{
		{"", "mock", "agent@mock"},
		{"codex", "gpt-4.1", "codex@gpt-4.1"},
		{oracleHarness, "mock", "oracle@mock"},
		{"python /opt/agents/agent.py --fast", "openai/gpt-4o", "python-agent.py@openai-gpt-4o"},
		{"sh -c 'echo 4'", "a b", "sh--c@a-b"},
		// what sets a variable never names a cell: it may be a key
		{"env OPENAI_API_KEY=sk-test-123 python agent.py", "m", "python-agent.py@m"},
		{"TOKEN=abc ./agent", "m", "agent@m"},
	} {
		got := cellName(harnessName(tc.harness), tc.model)
		assert.Equal(t, tc.want, got, "cellName(harnessName(%q), %q)", tc.harness, tc.model)
		assert.NoError(t, results.ValidateRunID(workflows.CellRunID("run", got)), "a cell's run id is a valid run id")
	}
}

// sweepWith runs `starter eval args…` with an action that only builds the
// sweep the flags ask for.
func sweepWith(t *testing.T, args ...string) (workflows.SweepInput, bool, error) {
	t.Helper()
	t.Chdir(t.TempDir())
	cmd := evalCommand()
	var in workflows.SweepInput
	var ok bool
	cmd.Action = func(cctx *cli.Context) error {
		cfg, err := runConfig(cctx)
		if err != nil {
			return err
		}
		in, ok, err = sweepInput(cctx, cfg)
		return err
	}
	var out bytes.Buffer
	app := &cli.App{Name: "starter", Commands: []*cli.Command{cmd}, Writer: &out, ErrWriter: &out}
	err := app.Run(append([]string{"starter", "eval"}, args...))
	return in, ok, err
}

func TestSweepMatrixFromFlagsAndRunFile(t *testing.T) {
	in, ok, err := sweepWith(t, "--run-id", "sw", "--harness", ",sh agent.sh", "--model", "m1,m2")
	require.ErrorContains(t, err, "empty item", "an empty harness is refused, not taken as the built-in agent")
	assert.False(t, ok)

	in, ok, err = sweepWith(t, "--run-id", "sw", "--shuffle", "--seed", "7", "--harness", "oracle,sh agent.sh", "--model", "m1,m2")
	require.NoError(t, err)
	require.True(t, ok)
	var names []string
	for _, c := range in.Cells {
		names = append(names, c.Name)
	}
	assert.Equal(t, []string{"oracle@m1", "oracle@m2", "sh-agent.sh@m1", "sh-agent.sh@m2"}, names, "harness by harness, model by model")
	assert.True(t, in.Cells[0].Harness.Oracle)
	assert.Equal(t, []string{"sh", "agent.sh"}, in.Cells[2].Harness.Command)
	assert.False(t, in.Cells[2].Harness.Oracle)
	assert.Equal(t, "m2", in.Cells[3].Model)
	assert.Equal(t, uint64(7), in.Config.Seed, "every cell runs the run's seed")

	file := writeFile(t, "run.yaml", "run-id: sw\nharness: [oracle, sh agent.sh]\nmodel: [m1, m2]\n")
	fromFile, ok, err := sweepWith(t, "--config", file)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, in.Cells, fromFile.Cells, "a run file's lists make the same sweep")

	_, ok, err = sweepWith(t, "--run-id", "one", "--model", "m1")
	require.NoError(t, err)
	assert.False(t, ok, "one harness and one model is a plain evaluation")

	_, _, err = sweepWith(t, "--run-id", "x", "--model", "a,b", "--"+wiring.FlagBaseURL, "http://127.0.0.1:1")
	require.NoError(t, err, "models listed with --base-url are all that upstream's")
}

func TestSweepSummaryShowsCellsSideBySide(t *testing.T) {
	res := workflows.SweepResult{RunID: "sw", Taskset: "sample", WallTime: "3s", Cells: []workflows.CellResult{
		{Name: "agent@m1", RunID: "sw:agent@m1", HarnessName: "agent", Model: "m1", Result: workflows.Result{
			Rollouts: 4, MeanReward: 0.75, StdReward: 0.433, PassAtK: []workflows.PassAt{{K: 1, Value: 0.75}, {K: 2, Value: 1}},
			InputTokens: 120, OutputTokens: 30, CostUSD: 0.0125, WallTime: "1.2s"}},
		{Name: "sh@m2", RunID: "sw:sh@m2", HarnessName: "sh", Model: "m2", Error: "boom", Result: workflows.Result{
			Rollouts: 4, Failed: 3, Errors: []workflows.KindCount{{Kind: "harness_exit", Count: 3}}, UnpricedRollouts: 1}},
	}}
	var out bytes.Buffer
	printSweepSummary(&out, res, wiring.StoreConfig{})
	s := out.String()
	assert.Contains(t, s, "sweep sw: 2 cells over sample, wall time 3s")
	assert.Regexp(t, `agent@m1\s+agent\s+m1\s+4\s+0\.750 ± 0\.433\s+0\.750 1\.000\s+0\s+120/30\s+\$0\.0125\s+1\.2s`, s)
	assert.Regexp(t, `sh@m2\s+sh\s+m2\s+4\s+0\.000 ± 0\.000\s+-\s+3 \(harness_exit 3\)`, s)
	assert.Contains(t, s, "(+1 unpriced)")
	assert.Contains(t, s, "cell sh@m2 failed: boom")
	assert.ErrorContains(t, sweepError(res), "cells sh@m2 failed")
}

// starter export of a sweep writes its cells' rollouts, each row naming
// its cell, and starter results prints the cells side by side.
func TestExportAndResultsOfASweep(t *testing.T) {
	dir := t.TempDir()
	store := storetest.Files(t, dir)
	ctx := context.Background()
	sweep := workflows.SweepResult{RunID: "sw", Taskset: "sample", WallTime: "2s"}
	for i, name := range []string{"agent@m1", "agent@m2", "sh@m1", "sh@m2"} {
		runID := workflows.CellRunID("sw", name)
		for k := range 2 {
			rec := storetest.Record(runID, 0, k)
			rec.Reward = float64(i % 2)
			_, _, err := store.Put(ctx, rec, storetest.Trace(rec.Key, 0))
			require.NoError(t, err)
		}
		sweep.Cells = append(sweep.Cells, workflows.CellResult{Name: name, RunID: runID, Model: name[len(name)-2:],
			Result: workflows.Result{RunID: runID, Rollouts: 2, MeanReward: float64(i % 2)}})
	}
	require.NoError(t, store.WriteSummary(ctx, "sw", sweep))
	require.NoError(t, store.Close())

	out := filepath.Join(t.TempDir(), "sw.jsonl")
	require.NoError(t, newApp().Run([]string{"starter", "export", "--runs-dir", dir, "--out", out, "sw"}))
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	cells := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r export.Row
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		assert.Equal(t, workflows.CellRunID("sw", r.Cell), r.RunID, "a row's cell is its run's")
		cells[r.Cell]++
	}
	assert.Equal(t, map[string]int{"agent@m1": 2, "agent@m2": 2, "sh@m1": 2, "sh@m2": 2}, cells)

	stdout := captureStdout(t, func() {
		require.NoError(t, newApp().Run([]string{"starter", "results", "--runs-dir", dir, "sw"}))
	})
	assert.Contains(t, stdout, "sweep sw: 4 cells")
	for _, name := range []string{"agent@m1", "agent@m2", "sh@m1", "sh@m2"} {
		assert.Contains(t, stdout, name)
	}
}

// captureStdout is what f writes to os.Stdout.
func captureStdout(t *testing.T, f func()) string { return capture(t, &os.Stdout, f) }

// captureStderr is what f writes to os.Stderr.
func captureStderr(t *testing.T, f func()) string { return capture(t, &os.Stderr, f) }

// capture is what f writes to *file (os.Stdout or os.Stderr), which a
// pipe stands in for while f runs.
func capture(t *testing.T, file **os.File, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	old := *file
	*file = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	defer func() { *file = old }()
	f()
	require.NoError(t, w.Close())
	return <-done
}

// `starter eval` with two harnesses and two models runs a sweep in one
// command on the embedded server with the offline mock: the summary shows
// the four cells side by side, the export holds every cell's rollouts, and
// the same command again reports the finished sweep without running
// anything.
func TestSweepCommandComparesTheCells(t *testing.T) {
	dir := t.TempDir()
	agentBin := filepath.Join(dir, "evalflow-agent")
	build := exec.Command("go", "build", "-o", agentBin, "./cmd/evalflow-agent")
	build.Dir = ".."
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build the built-in agent: %s", out)
	t.Setenv(wiring.AgentEnv, agentBin)

	runs := filepath.Join(dir, "runs")
	args := []string{"eval", "--run-id", "sw", "--tasks", "3", "--rollouts-per-task", "2",
		"--harness", `agent,sh -c 'printf 0 > "$EVALFLOW_ANSWER_FILE"'`, "--model", "mock-a,mock-b",
		"--address", devtest.FreeAddr(t), "--embedded", "--ui-port", "-1", "--data-dir", filepath.Join(dir, "data"), "--runs-dir", runs}
	var stderr string
	stdout := captureStdout(t, func() {
		_, stderr, err = runStarter(t, args...)
	})
	require.NoError(t, err, "%s", stderr)
	assert.Contains(t, stdout, "sweep sw: 4 cells over sample")
	rows := map[string]string{}
	for _, line := range strings.Split(stdout, "\n") {
		if name, _, ok := strings.Cut(line, " "); ok && strings.Contains(name, "@") {
			rows[name] = line
		}
	}
	require.Len(t, rows, 4, "one row per cell:\n%s", stdout)
	assert.Regexp(t, `^agent@mock-a\s+agent\s+mock-a\s+6\s`, rows["agent@mock-a"])
	assert.Regexp(t, `^sh--c@mock-b\s+sh -c\s+mock-b\s+6\s+0\.000 ± 0\.000\s`, rows["sh--c@mock-b"], "the shell answers 0: never right")
	assert.NotContains(t, rows["agent@mock-b"], "0.000 ± 0.000", "the built-in agent with the mock gets some right")

	exported := filepath.Join(dir, "sw.jsonl")
	require.NoError(t, newApp().Run([]string{"starter", "export", "--runs-dir", runs, "--out", exported, "sw"}))
	b, err := os.ReadFile(exported)
	require.NoError(t, err)
	cells := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r export.Row
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		cells[r.Cell]++
	}
	assert.Equal(t, map[string]int{"agent@mock-a": 6, "agent@mock-b": 6, "sh--c@mock-a": 6, "sh--c@mock-b": 6}, cells)

	stdout = captureStdout(t, func() {
		_, stderr, err = runStarter(t, args...)
	})
	require.NoError(t, err, "%s", stderr)
	assert.Contains(t, stdout, "sweep sw: 4 cells", "the finished sweep's summary again")
}

// Stopping `starter eval` in the middle of a sweep (Ctrl-C: the embedded
// server and worker stop with it) and running `starter resume <run-id>`
// resumes every cell: each ends with all its rollouts, and the rollouts
// stored before the stop are the same records, never run again.
func TestSweepCommandStoppedResumesEveryCell(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	// The shell harness takes a moment per rollout, so the stop comes
	// while the cells run.
	where := []string{"--address", devtest.FreeAddr(t), "--embedded", "--ui-port", "-1", "--data-dir", filepath.Join(dir, "data"), "--runs-dir", runs}
	args := append([]string{"eval", "--run-id", "sw", "--tasks", "6", "--max-concurrent", "1",
		"--harness", `sh -c 'sleep 0.3; printf 0 > "$EVALFLOW_ANSWER_FILE"',oracle`, "--model", "mock,mock-b"}, where...)
	store, err := results.Open(runs)
	require.NoError(t, err)
	cellIDs := []string{"sw:sh--c@mock", "sw:sh--c@mock-b", "sw:oracle@mock", "sw:oracle@mock-b"}
	stored := func() map[string]results.Record {
		recs := map[string]results.Record{}
		for _, id := range cellIDs {
			list, err := store.List(context.Background(), id)
			require.NoError(t, err)
			for _, r := range list {
				recs[r.Key] = r
			}
		}
		return recs
	}

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		app := newApp()
		app.Writer, app.ErrWriter = io.Discard, io.Discard
		done <- app.RunContext(ctx, append([]string{"starter"}, args...))
	}()
	require.Eventually(t, func() bool { return len(stored()) >= 4 }, 2*time.Minute, 20*time.Millisecond, "rollouts stored before the stop")
	stop()
	var code exitCode
	require.ErrorAs(t, <-done, &code, "a stopped starter exits 130")
	assert.Equal(t, exitCode(130), code)
	before := stored()
	require.Less(t, len(before), 24, "the stop came before the sweep ended")

	stdout := captureStdout(t, func() {
		_, _, err = runStarter(t, append(append([]string{"resume"}, where...), "sw")...)
	})
	require.NoError(t, err)
	assert.Contains(t, stdout, "sweep sw: 4 cells", "resume watches the sweep to its end and prints its cells")
	after := stored()
	require.Len(t, after, 24, "every cell ends with all its rollouts")
	for key, rec := range before {
		assert.Equal(t, rec.FinishedAt, after[key].FinishedAt, "rollout %s, stored before the stop, ran again", key)
		assert.Equal(t, rec.Attempt, after[key].Attempt, "rollout %s", key)
	}
	for _, id := range cellIDs {
		list, err := store.List(context.Background(), id)
		require.NoError(t, err)
		assert.Len(t, list, 6, "cell %s", id)
	}
}

// cellsOf are the cells of the harness × model lists, as the starter names
// them.
func cellsOf(t *testing.T, harnesses, models []string) []workflows.SweepCell {
	t.Helper()
	cells, err := sweepCells(workflows.RunConfig{RunID: "sw"}, harnesses, models, "")
	require.NoError(t, err)
	return cells
}

// Rerunning a sweep's command with other lists says what applies: a running
// sweep keeps its own cells, and names them; one started again names the
// cells added and dropped, and where a dropped cell's rollouts stay.
func TestSweepRerunWithOtherCellsSaysSo(t *testing.T) {
	running := cellsOf(t, []string{"", "oracle"}, []string{"x", "y"})
	asked := cellsOf(t, []string{"", "oracle"}, []string{"x", "y", "z"})

	var b strings.Builder
	attachedSweep(&b, "sw", running, asked)
	assert.Equal(t, "Sweep sw is already running with other cells: watching its own (agent@x, agent@y, oracle@x, oracle@y), "+
		"not those asked for (agent@x, agent@y, agent@z, oracle@x, oracle@y, oracle@z).\n"+
		"To run the others, wait for it to end and run this command again, or give a new --run-id.\n", b.String())

	b.Reset()
	attachedSweep(&b, "sw", running, running)
	assert.Equal(t, "Sweep sw is already running: watching it (its own cells apply).\n", b.String(), "the same cells: nothing to tell")

	b.Reset()
	restartedSweep(&b, "sw", running, cellsOf(t, []string{"", "oracle"}, []string{"y", "z"}))
	assert.Equal(t, "Sweep sw: cells added: agent@z, oracle@z (they start with no stored rollouts).\n"+
		"Sweep sw: cells dropped: agent@x, oracle@x (their stored rollouts stay in the store, e.g. starter results sw:agent@x).\n", b.String())

	b.Reset()
	restartedSweep(&b, "sw", running, running)
	assert.Empty(t, b.String(), "the same cells: nothing added or dropped")
	restartedSweep(&b, "sw", nil, asked)
	assert.Empty(t, b.String(), "no earlier sweep under the id: nothing to compare")
}

// The same sweep command with another --model list, on the embedded
// server: while the sweep runs, the starter says it watches the sweep's
// own cells; once it has finished, a rerun of its failures with other
// lists names the cells added and dropped.
func TestSweepCommandWithOtherListsSaysWhichCellsApply(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	where := []string{"--address", devtest.FreeAddr(t), "--embedded", "--ui-port", "-1", "--viewer-addr", "-1",
		"--data-dir", filepath.Join(dir, "data"), "--runs-dir", runs}
	eval := func(models string, extra ...string) []string {
		return append(append([]string{"eval", "--run-id", "sw", "--tasks", "4", "--max-concurrent", "1",
			"--harness", `sh -c 'sleep 0.2; printf 0 > "$EVALFLOW_ANSWER_FILE"',oracle`, "--model", models}, where...), extra...)
	}
	store, err := results.Open(runs)
	require.NoError(t, err)
	count := func() int {
		n := 0
		for _, id := range []string{"sw:sh--c@mock", "sw:sh--c@mock-b", "sw:oracle@mock", "sw:oracle@mock-b"} {
			list, err := store.List(context.Background(), id)
			require.NoError(t, err)
			n += len(list)
		}
		return n
	}

	// Stopped midway: the sweep is still running on the server.
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		app := newApp()
		app.Writer, app.ErrWriter = io.Discard, io.Discard
		done <- app.RunContext(ctx, append([]string{"starter"}, eval("mock,mock-b")...))
	}()
	require.Eventually(t, func() bool { return count() >= 2 }, 2*time.Minute, 20*time.Millisecond, "rollouts stored before the stop")
	stop()
	var code exitCode
	require.ErrorAs(t, <-done, &code)

	stderr := captureStderr(t, func() {
		_, _, err = runStarter(t, eval("mock,mock-b,mock-c", "--detach")...)
	})
	require.NoError(t, err, "%s", stderr)
	assert.Contains(t, stderr, "Sweep sw is already running with other cells: watching its own (sh--c@mock, sh--c@mock-b, oracle@mock, oracle@mock-b), "+
		"not those asked for (sh--c@mock, sh--c@mock-b, sh--c@mock-c, oracle@mock, oracle@mock-b, oracle@mock-c)")

	stdout := captureStdout(t, func() {
		_, _, err = runStarter(t, append(append([]string{"resume"}, where...), "sw")...)
	})
	require.NoError(t, err)
	assert.Contains(t, stdout, "sweep sw: 4 cells", "the sweep ran with its own cells")

	stderr = captureStderr(t, func() {
		stdout = captureStdout(t, func() {
			_, _, err = runStarter(t, eval("mock,mock-c", "--retry-failed")...)
		})
	})
	require.NoError(t, err, "%s", stderr)
	assert.Contains(t, stderr, "Sweep sw: cells added: sh--c@mock-c, oracle@mock-c (they start with no stored rollouts).")
	assert.Contains(t, stderr, "Sweep sw: cells dropped: sh--c@mock-b, oracle@mock-b (their stored rollouts stay in the store, e.g. starter results sw:sh--c@mock-b).")
	assert.Contains(t, stdout, "sweep sw: 4 cells")
	list, err := store.List(context.Background(), "sw:sh--c@mock-b")
	require.NoError(t, err)
	assert.Len(t, list, 4, "a dropped cell's rollouts stay stored")
}
