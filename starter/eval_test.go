package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mattn/go-shellwords"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/internal/harness/packaged"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

// parseEval parses eval's flags from args and builds the run's config.
func parseEval(t *testing.T, args ...string) (workflows.RunConfig, error) {
	t.Helper()
	set := flag.NewFlagSet("eval", flag.ContinueOnError)
	for _, f := range evalCommand().Flags {
		require.NoError(t, f.Apply(set))
	}
	require.NoError(t, set.Parse(args))
	cctx := cli.NewContext(&cli.App{}, set, nil)
	cctx.Context = context.Background()
	return runConfig(cctx)
}

func TestRunConfigFromFlags(t *testing.T) {
	cfg, err := parseEval(t, "--tasks", "12", "--harness", "python 'my agent.py' --fast", "--temperature", "0.5", "--run-id", "r1")
	require.NoError(t, err)
	assert.Equal(t, "r1", cfg.RunID)
	assert.Equal(t, int64(12), cfg.Tasks)
	assert.Equal(t, []string{"python", "my agent.py", "--fast"}, cfg.Harness.Command)
	require.NotNil(t, cfg.Sampling.Temperature)
	assert.Equal(t, 0.5, *cfg.Sampling.Temperature)
	assert.Nil(t, cfg.Sampling.TopP, "unset sampling fields stay unset")
	assert.Equal(t, "mock", cfg.Model, "no provider: the mock model")
	assert.Equal(t, "sample", cfg.Taskset)
	assert.False(t, cfg.RetryFailed, "stored failures are reused unless asked")

	cfg, err = parseEval(t, "--run-id", "r1", "--retry-failed")
	require.NoError(t, err)
	assert.True(t, cfg.RetryFailed, "--retry-failed reruns stored failures")
}

func TestRolloutLimitFlags(t *testing.T) {
	cfg, err := parseEval(t, "--run-id", "r1", "--max-turns", "5", "--max-tokens-total", "20000", "--max-model-time", "90s")
	require.NoError(t, err)
	assert.Equal(t, 5, cfg.Harness.MaxTurns)
	assert.Equal(t, 20000, cfg.Harness.MaxTokensTotal)
	assert.Equal(t, 90*time.Second, cfg.Harness.MaxModelTime)

	cfg, err = parseEval(t, "--run-id", "r1")
	require.NoError(t, err)
	assert.Zero(t, cfg.Harness.MaxTokensTotal, "no token limit unless asked")
	assert.Zero(t, cfg.Harness.MaxModelTime, "no model time limit unless asked")
	assert.Zero(t, cfg.Harness.MaxCostUSD, "no cost limit unless asked")
	assert.Zero(t, cfg.MaxRunCostUSD)

	cfg, err = parseEval(t, "--run-id", "r1", "--max-cost", "0.25", "--max-run-cost", "12.5")
	require.NoError(t, err)
	assert.Equal(t, 0.25, cfg.Harness.MaxCostUSD)
	assert.Equal(t, 12.5, cfg.MaxRunCostUSD)
	for _, flag := range []string{"--max-cost", "--max-run-cost"} {
		_, err = parseEval(t, "--run-id", "r1", flag, "-1")
		assert.ErrorContains(t, err, flag+" -1 is negative", "parse %s -1", flag)
	}
}

// The summary says what the run cost, what is unknown, and that
// --max-run-cost stopped it.
func TestSummarySaysTheCost(t *testing.T) {
	var b strings.Builder
	printSummary(&b, workflows.Result{RunID: "r1", Rollouts: 3, CostUSD: 0.01234, UnpricedRollouts: 1,
		Stopped: workflows.StoppedMaxRunCost}, wiring.StoreConfig{})
	out := b.String()
	assert.Regexp(t, `\ncost\s+\$0\.0123 \(and unknown for 1 rollouts: a call of a model without a price, add it with --prices, or an answer without usage\)\n`, out)
	assert.Regexp(t, `\nstopped\s+at --max-run-cost`, out)

	b.Reset()
	printSummary(&b, workflows.Result{RunID: "r1", CostUSD: 0.5}, wiring.StoreConfig{})
	assert.Contains(t, b.String(), "$0.5000\n")
	assert.NotContains(t, b.String(), "unknown")
	assert.NotContains(t, b.String(), "stopped")
}

// A run that scored nothing says so rather than a mean of 0; a mean that
// leaves out refused tasks says so, and the summary names them with why.
func TestSummaryOfRefusedTasks(t *testing.T) {
	refused := workflows.FailedRollout{Key: "r1/0/1/0", Kind: rollout.KindConfig, Error: "task broken: the image of environment/Dockerfile does not build: exit status 100"}
	var b strings.Builder
	printSummary(&b, workflows.Result{RunID: "r1", Rollouts: 2, Failed: 2, Refused: 2,
		Errors: []workflows.KindCount{{Kind: rollout.KindConfig, Count: 2}}, FailedSamples: []workflows.FailedRollout{refused}}, wiring.StoreConfig{})
	out := b.String()
	assert.Regexp(t, `
mean reward\s+none: no rollout was scored \(2 rollouts of tasks that cannot run as configured left out: errors below\)\n`, out)
	assert.NotRegexp(t, `mean reward\s+0\.000`, out)
	assert.Regexp(t, `\nerrors\s+2 \(config 2\)\n\s+r1/0/1/0\s+config: task broken: the image of environment/Dockerfile does not build`, out)

	b.Reset()
	printSummary(&b, workflows.Result{RunID: "r1", Rollouts: 4, Failed: 1, Refused: 1, MeanReward: 2.0 / 3}, wiring.StoreConfig{})
	assert.Regexp(t, `\nmean reward\s+0\.667 ± 0\.000 \(1 rollouts of tasks that cannot run as configured left out: errors below\)\n`, b.String())

	b.Reset()
	printRefused(&b, []error{errors.New("task broken: the image of environment/Dockerfile does not build: exit status 100")})
	assert.Equal(t, "refused: task broken: the image of environment/Dockerfile does not build: exit status 100\n"+
		"1 task(s) cannot run as configured: the run goes on without them; their rollouts are recorded as config errors and left out of the scores\n", b.String())
}

func TestTraceTokensFlags(t *testing.T) {
	cfg, err := parseEval(t, "--run-id", "r1", "--trace-tokens", "--top-logprobs", "3")
	require.NoError(t, err)
	assert.True(t, cfg.Harness.TraceTokens)
	assert.Equal(t, 3, cfg.Harness.TopLogprobs)

	cfg, err = parseEval(t, "--run-id", "r1")
	require.NoError(t, err)
	assert.False(t, cfg.Harness.TraceTokens, "no token data unless asked")

	_, err = parseEval(t, "--run-id", "r1", "--trace-tokens", "--top-logprobs", "-1")
	assert.Error(t, err)
}

// --token-in, on the command line or in a run file, sends prompts as token
// ids where it can, which builds on traced tokens.
func TestTokenInFlag(t *testing.T) {
	cfg, err := parseEval(t, "--run-id", "r1", "--token-in")
	require.NoError(t, err)
	assert.True(t, cfg.Harness.TokenIn)
	assert.True(t, cfg.Harness.TraceTokens, "token-in implies --trace-tokens")

	cfg, err = parseEval(t, "--run-id", "r1", "--trace-tokens")
	require.NoError(t, err)
	assert.False(t, cfg.Harness.TokenIn, "prompts go as text unless asked")

	cfg, _, err = evalWith(t, "--config", writeFile(t, "run.yaml", "run-id: r2\ntoken-in: true\n"))
	require.NoError(t, err)
	assert.True(t, cfg.Harness.TokenIn)
	assert.True(t, cfg.Harness.TraceTokens)
}

func TestPolicyVersionHeaderFlag(t *testing.T) {
	cfg, err := parseEval(t, "--run-id", "r1", "--policy-version-header", "x-policy-version")
	require.NoError(t, err)
	assert.Equal(t, "x-policy-version", cfg.Harness.PolicyVersionHeader)

	cfg, err = parseEval(t, "--run-id", "r1")
	require.NoError(t, err)
	assert.Empty(t, cfg.Harness.PolicyVersionHeader, "no header unless named")

	_, err = parseEval(t, "--run-id", "r1", "--policy-version-header", "x policy")
	require.ErrorContains(t, err, `--policy-version-header "x policy" is not an HTTP header name`)
}

func TestPackagedHarnessFlags(t *testing.T) {
	cfg, err := parseEval(t, "--harness", "codex", "--run-id", "r1")
	require.NoError(t, err)
	assert.Equal(t, []string{"packaged:codex@" + packaged.Codex.Version}, cfg.Harness.Command, "the pinned version, named in the run's input")

	cfg, err = parseEval(t, "--harness", "claude-code", "--harness-version", "2.0.0", "--run-id", "r1")
	require.NoError(t, err)
	assert.Equal(t, []string{"packaged:claude-code@2.0.0"}, cfg.Harness.Command)

	_, err = parseEval(t, "--harness", "python a.py", "--harness-version", "1.0", "--run-id", "r1")
	require.EqualError(t, err, "--harness-version 1.0: only a packaged harness has a version (--harness codex or --harness claude-code)")
}

func TestRunConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--run-id", "a/b"}, "--run-id"},
		{[]string{"--base-url", "http://127.0.0.1:1/v1"}, "--model is required"},
		{[]string{"--harness", "'unclosed"}, "--harness"},
		{[]string{"--tasks", "-3"}, "negative"},
		{[]string{"--harness-dialect", "gemini"}, "--harness-dialect"},
		// Checked before the run starts, not when its first rollout runs.
		{[]string{"--rubric", "bogus"}, `--rubric: unknown rubric "bogus"`},
		{[]string{"--rubric", "rank:bogus"}, "--rubric"},
		{[]string{"--rubric", "tests*0.8+judje*0.2"}, `--rubric: rubric "tests*0.8+judje*0.2": unknown rubric "judje"`},
		{[]string{"--rubric", "exact*0.5+command:"}, `--rubric: rubric "exact*0.5+command:": command: names no program`},
		{[]string{"--rubric", "exact*0.5 command:./check.sh"}, `unexpected "command:./check.sh" after exact: join parts with +`},
		// Out of range: not quietly the workflow's default.
		{[]string{"--max-concurrent", "0"}, "--max-concurrent 0: must be at least 1"},
		{[]string{"--max-concurrent", "-2"}, "--max-concurrent -2 is negative"},
		{[]string{"--rollouts-per-task", "0"}, "--rollouts-per-task 0"},
		{[]string{"--rollouts-per-task", "-1"}, "--rollouts-per-task -1 is negative"},
		{[]string{"--max-attempts", "-1"}, "--max-attempts -1 is negative"},
		{[]string{"--max-turns", "0"}, "--max-turns 0"},
		{[]string{"--max-tokens", "0"}, "--max-tokens 0"},
		{[]string{"--continue-as-new-after", "0"}, "--continue-as-new-after 0"},
		{[]string{"--harness-timeout", "0s"}, "--harness-timeout"},
		{[]string{"--heartbeat-timeout", "0s"}, "--heartbeat-timeout 0s: want at least 1s"},
		{[]string{"--heartbeat-timeout", "500ms"}, "--heartbeat-timeout 500ms: want at least 1s"},
		{[]string{"--max-tokens-total", "-1"}, "--max-tokens-total -1 is negative"},
		{[]string{"--max-model-time", "-1s"}, "--max-model-time -1s is negative"},
		// The run store's own rule: refused at once, not in every write.
		{[]string{"--run-id", "."}, "--run-id"},
		{[]string{"--run-id", strings.Repeat("r", 300)}, "--run-id"},
		{[]string{"--run-id", "a;b"}, `--run-id: invalid run id "a;b"`},
	} {
		_, err := parseEval(t, tc.args...)
		require.Error(t, err, "runConfig(%q)", tc.args)
		assert.Contains(t, err.Error(), tc.want, "runConfig(%q)", tc.args)
	}
}

func TestGeneratedRunIDsDiffer(t *testing.T) {
	a, b := newRunID("eval"), newRunID("eval")
	assert.NotEqual(t, a, b)
	assert.Regexp(t, `^eval-\d{8}-\d{6}-[0-9a-f]{6}$`, a)
}

func TestRunConfigAccepts(t *testing.T) {
	for _, args := range [][]string{
		{"--run-id", "nightly-2026.11.21:gpt@v2+x=1"},
		{"--rubric", "numeric:0.01", "--max-concurrent", "1", "--rollouts-per-task", "1", "--tasks", "0"},
		{"--rubric", "rank:exact"},
		{"--rubric", "exact*0.5+command:./check.sh*0.5"},
		{"--rubric", "tests*0.8+judge*0.2"},
	} {
		_, err := parseEval(t, args...)
		assert.NoError(t, err, "runConfig(%q)", args)
	}
}

func TestTrainCountsChecked(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--group-size", "0"}, "--group-size 0"},
		{[]string{"--epochs", "-1"}, "--epochs -1 is negative"},
		{[]string{"--max-failures", "-0.5"}, "--max-failures -0.5 is negative"},
	} {
		_, err := changedConfig(resumeContext(t, tt.args...), workflows.TrainInput{})
		require.Error(t, err, "runConfig(%q)", tt.args)
		assert.Contains(t, err.Error(), tt.want, "runConfig(%q)", tt.args)
	}
}

func TestUseMock(t *testing.T) {
	for _, tt := range []struct {
		model, notice string
	}{
		{"mock", "No provider configured (--base-url / OPENAI_BASE_URL): using the offline mock model."},
		{"gpt-4.1-mini", "--model gpt-4.1-mini was ignored because no provider is configured"},
	} {
		cfg := workflows.RunConfig{Model: tt.model}
		assert.Contains(t, useMock(&cfg), tt.notice, "useMock(%q)", tt.model)
		assert.Equal(t, "mock", cfg.Model, "useMock(%q): the run records the model that answers", tt.model)
	}
	assert.Error(t, mockCanServe(workflows.RunConfig{RunID: "r", Model: "gpt-4.1-mini"}), "a real model's run is not resumed on the mock")
	assert.NoError(t, mockCanServe(workflows.RunConfig{RunID: "r", Model: "mock"}))
}

func TestUILinks(t *testing.T) {
	assert.Empty(t, uiLinks("", "default", "r1"), "no UI known: no link")
	got := uiLinks("http://ui.example:8080/", "team a", "run-1")
	require.Len(t, got, 2)
	assert.Equal(t, "Temporal Web UI: http://ui.example:8080/namespaces/team%20a/workflows/run-1", got[0])
	assert.Equal(t, "  every workflow of the run: http://ui.example:8080/namespaces/team%20a/workflows?query=EvalflowRunId%3D%22run-1%22", got[1])
}

// The hint --detach prints is a command that reaches the run as printed:
// read back by status's own flags, it names the same server, namespace and
// run store directory, and the run id last (a flag after it is refused).
func TestDetachStatusHint(t *testing.T) {
	for _, v := range []string{"EVALFLOW_ADDRESS", "TEMPORAL_ADDRESS", "EVALFLOW_NAMESPACE", "TEMPORAL_NAMESPACE", "EVALFLOW_RUNS_DIR"} {
		t.Setenv(v, "") // restored when the test ends
		require.NoError(t, os.Unsetenv(v))
	}
	for _, tc := range []struct {
		args []string
		want map[string]string
	}{
		{[]string{"--address", "temporal.example:7233", "--namespace", "evals"},
			map[string]string{"address": "temporal.example:7233", "namespace": "evals", "runs-dir": "runs"}},
		{[]string{"--address", "10.0.0.5:7233", "--runs-dir", "/data/my runs"},
			map[string]string{"address": "10.0.0.5:7233", "namespace": "default", "runs-dir": "/data/my runs"}},
		{nil, map[string]string{"address": "localhost:7233", "namespace": "default", "runs-dir": "runs"}},
	} {
		set := flag.NewFlagSet("eval", flag.ContinueOnError)
		for _, f := range evalCommand().Flags {
			require.NoError(t, f.Apply(set))
		}
		require.NoError(t, set.Parse(tc.args))
		hint := statusHint(cli.NewContext(&cli.App{}, set, nil), "run-1")

		words, err := shellwords.Parse(hint)
		require.NoError(t, err)
		require.Equal(t, []string{"starter", "status"}, words[:2], hint)
		status := flag.NewFlagSet("status", flag.ContinueOnError)
		for _, f := range statusCommand().Flags {
			require.NoError(t, f.Apply(status))
		}
		require.NoError(t, status.Parse(words[2:]), hint)
		assert.Equal(t, []string{"run-1"}, status.Args(), "the run id comes last: %s", hint)
		for name, want := range tc.want {
			assert.Equal(t, want, status.Lookup(name).Value.String(), "%s in %s", name, hint)
		}
	}
}
