package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mattn/go-shellwords"
	"github.com/urfave/cli/v2"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/agent"
	"github.com/evalflow/evalflow/internal/harness/packaged"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/rubrics"
	"github.com/evalflow/evalflow/run"
	"github.com/evalflow/evalflow/tasksets/tables"
	"github.com/evalflow/evalflow/workflows"
)

func evalCommand() *cli.Command {
	return &cli.Command{
		Name:      "eval",
		Usage:     "run an evaluation and watch it (resumes a run with the same --run-id)",
		ArgsUsage: " ",
		Flags: append(append(runFlags(),
			&cli.IntFlag{Name: "rollouts-per-task", Value: 1, Usage: "rollouts per task (pass@k is reported up to this k)"},
			&cli.BoolFlag{Name: "detach", Usage: "start the run and return without watching it"},
			&cli.Float64Flag{Name: "max-failures", Usage: "end the run failed when more rollouts failed than this: a count (>= 1) or a fraction (< 1); 0: no limit"},
			&cli.BoolFlag{Name: "audit", Usage: "first audit the taskset (starter audit, as <run-id>-audit), then score the run with and without the tasks it flags"},
		), wiring.WorkerFlags()...),
		Before: prepareRun(0),
		Action: runEval,
	}
}

func runEval(cctx *cli.Context) error {
	cfg, err := runConfig(cctx)
	if err != nil {
		return err
	}
	s, err := connectForRun(cctx, &cfg)
	if err != nil {
		return err
	}
	defer s.Close()

	ctx := cctx.Context
	if err := prepareTasks(ctx, s, cfg.Taskset); err != nil {
		return err
	}
	auditID := ""
	if cctx.Bool("audit") {
		acfg := cfg
		acfg.RunID = cfg.RunID + "-audit"
		if _, err := auditTaskset(cctx, s, acfg); err != nil {
			return fmt.Errorf("--audit: %w", err)
		}
		auditID = acfg.RunID
	}
	if in, ok, err := sweepInput(cctx, cfg); err != nil {
		return err
	} else if ok {
		return runSweep(cctx, s, in)
	}
	// What the store holds before the run starts is what it reuses.
	account, closeAccount := newStoreAccount(ctx, storeFlags(cctx), cfg.RunID)
	defer closeAccount()
	done, err := startOrAttach(ctx, s.client, cctx.String(wiring.FlagTaskQueue), cfg, account)
	if err != nil {
		return err
	}
	printWhere(s, cctx, cfg.RunID)
	defer startViewer(cctx, s.uiURL)()
	if done {
		return printResult(ctx, s.client, cctx, cfg.RunID)
	}
	if cctx.Bool("detach") {
		fmt.Printf("Started run %s. Watch it: %s\n", cfg.RunID, statusHint(cctx, cfg.RunID))
		return nil
	}
	bar := newProgressBar(os.Stderr)
	if s.worker == nil {
		go warnWithoutWorkers(ctx, s.client, cctx.String(wiring.FlagTaskQueue), bar)
	}
	res, err := watch(ctx, s.client, cfg.RunID, bar)
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "\nStopped watching. Run %s is saved; continue it with the same command and --run-id %s\n", cfg.RunID, cfg.RunID)
		return exitCode(130)
	}
	if failed, ok := run.FailedResult(err); ok {
		account.Eval(ctx, &failed)
		printSummary(os.Stdout, failed, storeFlags(cctx))
		return fmt.Errorf("run %s failed: %w", cfg.RunID, err)
	}
	if err != nil {
		return fmt.Errorf("run %s failed: %w", cfg.RunID, err)
	}
	account.Eval(ctx, &res)
	printSummary(os.Stdout, res, storeFlags(cctx))
	if auditID != "" {
		return printExcluded(ctx, os.Stdout, storeFlags(cctx), cfg.RunID, auditID)
	}
	return nil
}

// evalMaxFailures is an eval's --max-failures; a training run's applies to
// each epoch instead (TrainConfig).
func evalMaxFailures(cctx *cli.Context) float64 {
	if cctx.Command == nil || cctx.Command.Name != "eval" {
		return 0
	}
	return cctx.Float64("max-failures")
}

// runFlags are the starter's own flags every run type shares; the worker's
// (address, run store, provider, …) are added from wiring.WorkerFlags.
func runFlags() []cli.Flag {
	return []cli.Flag{
		configFlag, dryRunFlag, dataDirFlag, embeddedFlag, uiPortFlag, uiURLFlag, viewerAddrFlag,
		&cli.StringFlag{Name: "run-id", Usage: "run id; the same id resumes that run (default: generated)"},
		&cli.StringFlag{Name: "taskset", Value: "sample", Usage: "taskset: a JSONL, CSV, TSV or Parquet path, a Hugging Face dataset saved to disk (its directory), a directory of task directories, `sample`, `arithmetic[?seed=N]` (infinite), or name@version, a dataset of the --registry"},
		registryFlag,
		&cli.StringFlag{Name: "taskset.prompt-field", Usage: "CSV, Parquet and Hugging Face tasksets: the column holding the prompt (default prompt, else question)"},
		&cli.StringFlag{Name: "taskset.answer-field", Usage: "CSV, Parquet and Hugging Face tasksets: the column holding the reference answer (default answer, when there is one)"},
		&cli.StringFlag{Name: "taskset.id-field", Usage: "CSV, Parquet and Hugging Face tasksets: the column holding the task id (default id, else the row's index)"},
		&cli.Int64Flag{Name: "tasks", Usage: "number of tasks (default: the whole taskset)"},
		&cli.IntFlag{Name: "max-concurrent", Value: workflows.DefaultMaxConcurrent, Usage: "rollouts in flight at once, across all workers"},
		&cli.Uint64Flag{Name: "seed", Usage: "seed of the task order when --shuffle is set"},
		&cli.BoolFlag{Name: "shuffle", Usage: "visit tasks in a seeded random order"},
		&cli.StringFlag{Name: "model", Usage: "model name sent to the provider (no provider set: the offline mock, whatever this says); eval: a comma-separated list runs a sweep, one evaluation per harness × model"},
		&cli.Float64Flag{Name: "temperature", Usage: "sampling temperature set on every model call"},
		&cli.Float64Flag{Name: "top-p", Usage: "nucleus sampling set on every model call"},
		&cli.IntFlag{Name: "max-tokens", Usage: "max tokens set on every model call"},
		&cli.StringFlag{Name: "harness", Usage: "harness: codex or claude-code (packaged: installed by each worker from npm), `oracle` (runs each task's solution/solve.sh, to check a taskset), or a command, e.g. 'python agent.py' (default: the built-in agent, named `agent` in a list); eval: a comma-separated list runs a sweep, one evaluation per harness × model"},
		&cli.StringFlag{Name: "harness-version", Usage: "version of a packaged harness (default: its pinned version, " + pinnedVersions() + ")"},
		&cli.DurationFlag{Name: "harness-timeout", Value: workflows.DefaultHarnessTimeout, Usage: "kill a harness after this long"},
		harnessEnvFlag(),
		roleFlag(),
		&cli.StringFlag{Name: "harness-dialect", Usage: "protocol the built-in agent speaks: chat (default), responses or anthropic"},
		&cli.DurationFlag{Name: "verifier-timeout", Usage: "kill a task's verifier after this long, whatever its task.toml says (default: the task's, else 10m)"},
		&cli.IntFlag{Name: "max-turns", Value: workflows.DefaultMaxTurns, Usage: "model calls a rollout may make; the interception server refuses the ones after it (EVALFLOW_MAX_TURNS)"},
		&cli.IntFlag{Name: "max-tokens-total", Usage: "tokens, prompt and completion, all a rollout's model calls may use together; 0 is no limit"},
		&cli.DurationFlag{Name: "max-model-time", Usage: "time all a rollout's model calls may take, summed; 0 is no limit"},
		&cli.Float64Flag{Name: "max-cost", Usage: "USD all a rollout's model calls may cost together, at the workers' prices (--prices); the interception server refuses the calls after it (limit:cost); 0 is no limit"},
		&cli.Float64Flag{Name: "max-run-cost", Usage: "evaluations: USD the run's stored rollouts may cost; once reached no rollout starts, those running finish, and the run ends saying so (resume with a higher bound to go on); 0 is no limit"},
		&cli.BoolFlag{Name: "trace-tokens", Usage: "ask OpenAI-compatible chat upstreams (vLLM, SGLang) for prompt and completion token ids and logprobs, and record them on every turn"},
		&cli.IntFlag{Name: "top-logprobs", Usage: "with --trace-tokens: alternatives per completion token to record (0: none)"},
		&cli.BoolFlag{Name: "token-in", Usage: "send a chat call that extends an earlier turn to the upstream with its prompt as token ids (that turn's prompt and completion ids, then the new messages' tokens from the upstream's /tokenize) on vLLM's /v1/chat/completions/tokens, so turns extend each other exactly; other calls go as text (implies --trace-tokens)"},
		&cli.StringFlag{Name: "policy-version-header", Usage: "response header of the upstream naming the policy version (an integer) that answered, recorded on every turn, e.g. x-policy-version (default: each turn records the version the trainer announced)"},
		&cli.StringFlag{Name: "rubric", Value: workflows.DefaultRubric, Usage: "how rollouts are scored: exact, numeric[:tol], contains, regex[:pattern], tests, command:PROGRAM, judge[:model], weighted sums (tests*0.8+judge*0.2), rank:<rubric>"},
		&cli.IntFlag{Name: "max-attempts", Value: workflows.DefaultMaxAttempts, Usage: "attempts of a rollout after infrastructure failures"},
		&cli.DurationFlag{Name: "heartbeat-timeout", Value: workflows.DefaultHeartbeatTimeout, Usage: "how long a rollout's worker may go silent before the rollout moves to another worker (a worker that dies costs its rollouts this much)"},
		&cli.BoolFlag{Name: "retry-failed", Usage: "with the --run-id of an earlier run: rerun its stored failures and keep its successes"},
		&cli.IntFlag{Name: "continue-as-new-after", Value: workflows.DefaultContinueAsNewAfter, Usage: "rollouts per workflow history segment"},
		&cli.StringFlag{Name: "worker", Value: "auto", Usage: "run a worker in this process: auto (only with the embedded server), on, off"},
	}
}

// pinnedVersions lists the packaged harnesses' pinned versions.
func pinnedVersions() string {
	var vs []string
	for _, h := range packaged.Harnesses {
		vs = append(vs, h.Name+" "+h.Version)
	}
	return strings.Join(vs, ", ")
}

// oracleHarness is the --harness that runs each task's reference solution.
const oracleHarness = "oracle"

// builtinHarness is the --harness that names the built-in agent, the
// default, in a sweep's list of harnesses.
const builtinHarness = "agent"

// runConfig maps the run flags onto the workflow input, and refuses what
// the input's Validate refuses, naming the flag.
func runConfig(cctx *cli.Context) (workflows.RunConfig, error) {
	harnesses, models, err := matrix(cctx)
	if err != nil {
		return workflows.RunConfig{}, err
	}
	cfg := workflows.RunConfig{
		RunID: cctx.String("run-id"),
		Taskset: tables.WithFields(cctx.String("taskset"), tables.Fields{
			Prompt: cctx.String("taskset.prompt-field"), Answer: cctx.String("taskset.answer-field"), ID: cctx.String("taskset.id-field"),
		}),
		Tasks:           cctx.Int64("tasks"),
		RolloutsPerTask: rolloutsPerTask(cctx),
		MaxConcurrent:   cctx.Int("max-concurrent"),
		Seed:            cctx.Uint64("seed"),
		Shuffle:         cctx.Bool("shuffle"),
		Model:           models[0],
		Sampling:        sampling(cctx),
		Rubric:          cctx.String("rubric"),
		RetryFailed:     cctx.Bool("retry-failed"),
		MaxFailures:     evalMaxFailures(cctx),
		MaxRunCostUSD:   cctx.Float64("max-run-cost"),
		Limits: workflows.Limits{
			MaxAttempts:        cctx.Int("max-attempts"),
			ContinueAsNewAfter: cctx.Int("continue-as-new-after"),
			HeartbeatTimeout:   cctx.Duration("heartbeat-timeout"),
		},
	}
	if cfg.RunID == "" {
		cfg.RunID = newRunID(cctx.Command.Name)
	}
	if cfg.Harness, err = harnessConfig(cctx, harnesses[0]); err != nil {
		return cfg, err
	}
	if err := checkRunFlags(cctx, harnesses); err != nil {
		return cfg, err
	}
	// Before the defaults: a 0 given is refused, not quietly the default
	// (the flags carry the defaults).
	if err := flagError(cctx, cfg.Validate()); err != nil {
		return cfg, err
	}
	if err := checkNames(cfg); err != nil {
		return cfg, err
	}
	if cfg.Taskset, err = resolveTaskset(cctx, cfg.Taskset); err != nil {
		return cfg, err
	}
	return cfg.WithDefaults(), nil
}

// harnessConfig maps the harness flags, for the harness named (the first
// of a sweep's).
func harnessConfig(cctx *cli.Context, name string) (rollout.HarnessConfig, error) {
	h := rollout.HarnessConfig{
		Timeout:         cctx.Duration("harness-timeout"),
		TimeoutGiven:    cctx.IsSet("harness-timeout"),
		VerifierTimeout: cctx.Duration("verifier-timeout"),
		MaxTurns:        cctx.Int("max-turns"),
		MaxTokensTotal:  cctx.Int("max-tokens-total"),
		MaxModelTime:    cctx.Duration("max-model-time"),
		MaxCostUSD:      cctx.Float64("max-cost"),
		// token-in builds on the turns' ids
		TraceTokens:         cctx.Bool("trace-tokens") || cctx.Bool("token-in"),
		TopLogprobs:         cctx.Int("top-logprobs"),
		PolicyVersionHeader: cctx.String("policy-version-header"),
		TokenIn:             cctx.Bool("token-in"),
		Dialect:             cctx.String("harness-dialect"),
		Env:                 harnessEnv(cctx),
	}
	var err error
	if h.Roles, err = roles(cctx); err != nil {
		return h, err
	}
	return withHarness(h, name, cctx.String("harness-version"))
}

// sampling is the sampling parameters given; those not given stay unset.
func sampling(cctx *cli.Context) rollout.Sampling {
	var s rollout.Sampling
	if cctx.IsSet("temperature") {
		v := cctx.Float64("temperature")
		s.Temperature = &v
	}
	if cctx.IsSet("top-p") {
		v := cctx.Float64("top-p")
		s.TopP = &v
	}
	if cctx.IsSet("max-tokens") {
		v := cctx.Int("max-tokens")
		s.MaxTokens = &v
	}
	return s
}

// withHarness is h running the harness the --harness value name gives: a
// packaged harness (at version), the oracle, a command line, or the
// built-in agent ("").
func withHarness(h rollout.HarnessConfig, name, version string) (rollout.HarnessConfig, error) {
	h.Command, h.Oracle, h.Adversary = nil, false, ""
	if name == builtinHarness {
		return h, nil
	}
	if p, ok := packaged.Lookup(name); ok {
		h.Command = packaged.Command(p, version)
	} else if a, ok := strings.CutPrefix(name, adversaryPrefix); ok {
		if !slices.Contains(agent.Adversaries, a) {
			return h, fmt.Errorf("--harness %q: no such adversary (the audit's: %s)", name, strings.Join(agent.Adversaries, ", "))
		}
		h.Adversary = a
	} else if name == oracleHarness {
		h.Oracle = true
	} else if name != "" {
		argv, err := shellwords.Parse(name)
		if err != nil || len(argv) == 0 {
			return h, fmt.Errorf("--harness %q: cannot split into a command line", name)
		}
		h.Command = argv
	}
	return h, nil
}

// fieldFlags name the flag that sets each field of a run's configuration
// (workflows.FieldError's Field) but rollouts_per_task (rolloutsFlag).
var fieldFlags = map[string]string{
	"run_id": "run-id", "taskset": "taskset", "model": "model", "tasks": "tasks",
	"max_concurrent": "max-concurrent", "max_failures": "max-failures", "max_run_cost_usd": "max-run-cost",
	"epochs": "epochs", "sampling.max_tokens": "max-tokens",
	"harness.dialect": "harness-dialect", "harness.policy_version_header": "policy-version-header",
	"harness.timeout": "harness-timeout", "harness.verifier_timeout": "verifier-timeout",
	"harness.max_turns": "max-turns", "harness.max_tokens_total": "max-tokens-total",
	"harness.max_model_time": "max-model-time", "harness.max_cost_usd": "max-cost",
	"harness.top_logprobs": "top-logprobs", "limits.heartbeat_timeout": "heartbeat-timeout",
	"limits.max_attempts": "max-attempts", "limits.continue_as_new_after": "continue-as-new-after",
}

// flagError words a *workflows.FieldError as the flag that gave the field
// ("--max-concurrent 0: must be at least 1"); other errors pass as they are.
func flagError(cctx *cli.Context, err error) error {
	var fe *workflows.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	flag, ok := fieldFlags[fe.Field]
	if fe.Field == "rollouts_per_task" {
		flag, ok = rolloutsFlag(cctx), true
	}
	if !ok {
		return err
	}
	return fmt.Errorf("--%s %s", flag, fe.Problem)
}

// checkRunFlags refuses what only flags can get wrong: a zero given where
// zero means none given, a version for a harness without versions, a bound
// the command does not apply.
func checkRunFlags(cctx *cli.Context, harnesses []string) error {
	if cctx.IsSet("verifier-timeout") && cctx.Duration("verifier-timeout") == 0 {
		return fmt.Errorf("--verifier-timeout 0s: must be positive")
	}
	if cctx.IsSet("max-run-cost") && cctx.Command != nil && cctx.Command.Name == "train" {
		return fmt.Errorf("--max-run-cost bounds evaluations only; bound a training run's rollouts with --max-cost")
	}
	v := cctx.String("harness-version")
	for _, h := range harnesses {
		if _, ok := packaged.Lookup(h); v != "" && !ok {
			return fmt.Errorf("--harness-version %s: only a packaged harness has a version (--harness %s)", v, strings.Join(packaged.Names(), " or --harness "))
		}
	}
	return nil
}

// checkNames refuses a run id the run store would refuse, a rubric that
// does not compile and a harness environment that carries a credential:
// checks of packages the workflows do not import, made before the run
// starts rather than in its first rollout.
func checkNames(cfg workflows.RunConfig) error {
	if err := results.ValidateRunID(cfg.RunID); err != nil {
		return fmt.Errorf("--run-id: %w", err)
	}
	if _, err := rubrics.Compile(cfg.Rubric); err != nil {
		return fmt.Errorf("--rubric: %w", err)
	}
	if err := harness.CheckRunEnv(cfg.Harness.Env); err != nil {
		return fmt.Errorf("--harness-env: %w", err)
	}
	return nil
}

// rolloutsPerTask is the value of rolloutsFlag; a command without that
// flag (audit) runs the default.
func rolloutsPerTask(cctx *cli.Context) int {
	if cctx.Value(rolloutsFlag(cctx)) == nil {
		return workflows.DefaultRolloutsPerTask
	}
	return cctx.Int(rolloutsFlag(cctx))
}

// rolloutsFlag is the flag that gives the rollouts per task:
// --rollouts-per-task for evals, --group-size for training.
func rolloutsFlag(cctx *cli.Context) string {
	if cctx.IsSet("group-size") || !cctx.IsSet("rollouts-per-task") && cctx.Int("group-size") > 0 {
		return "group-size"
	}
	return "rollouts-per-task"
}

func newRunID(kind string) string {
	if kind == "" {
		kind = "run"
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return kind + "-" + time.Now().Format("20060102-150405") + "-" + hex.EncodeToString(b)
}

// startOrAttach starts the run, or attaches to it when a run with that id
// exists (run.Attach), and says which; done is true for a finished run,
// whose result is the one to print.
func startOrAttach(ctx context.Context, c client.Client, taskQueue string, cfg workflows.RunConfig, account *run.Account) (done bool, err error) {
	a, err := run.Attach(ctx, c, taskQueue, cfg)
	var changed *run.ChangedError
	if errors.As(err, &changed) {
		return false, changedError(changed, "use a new --run-id, or go on with these tasks and the rollouts stored under the earlier ones: starter resume "+cfg.RunID+" --force with the same flags")
	}
	if err != nil {
		return false, err
	}
	switch a.Prior {
	case enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED:
		fmt.Fprintf(os.Stderr, "Starting run %s: %d tasks × %d rollouts of %q with model %q.\n",
			cfg.RunID, cfg.Tasks, cfg.RolloutsPerTask, workflows.TasksetName(cfg.Taskset), cfg.Model)
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		fmt.Fprintf(os.Stderr, "Run %s is already running: resuming it (its own configuration applies).\n", cfg.RunID)
		account.AttachedSince(a.StartedAt)
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		if a.Done() {
			fmt.Fprintf(os.Stderr, "Run %s has already finished (add --retry-failed to rerun its failed rollouts).\n", cfg.RunID)
			return true, nil
		}
		fmt.Fprintf(os.Stderr, "Run %s has finished: running its stored failures again; its successes are reused.\n", cfg.RunID)
	default:
		fmt.Fprintf(os.Stderr, "Run %s ended %s: starting it again; finished rollouts are reused from the store.\n",
			cfg.RunID, statusWord(a.Prior))
	}
	warnStarted(a.Started)
	return false, nil
}

// warnStarted says when a run started without evalflow's search attributes.
func warnStarted(s *run.Started) {
	if s != nil && s.NoSearchAttributes {
		fmt.Fprintf(os.Stderr, "warning: the namespace lacks evalflow's search attributes (%s, %s, %s); started without them\n",
			workflows.AttrRunID, workflows.AttrModel, workflows.AttrTaskset)
	}
}

// watch draws progress on bar until the run ends and returns its result.
func watch(ctx context.Context, c client.Client, runID string, bar *progressBar) (workflows.Result, error) {
	type outcome struct {
		res workflows.Result
		err error
	}
	end := make(chan outcome, 1)
	go func() {
		var o outcome
		o.err = c.GetWorkflow(ctx, runID, "").Get(ctx, &o.res)
		end <- o
	}()
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case o := <-end:
			if p, err := run.Progress(context.WithoutCancel(ctx), c, runID); err == nil {
				bar.draw(p)
			}
			bar.finish()
			if ctx.Err() != nil {
				return o.res, ctx.Err()
			}
			return o.res, o.err
		case <-t.C:
			if p, err := run.Progress(ctx, c, runID); err == nil {
				bar.draw(p)
			}
		}
	}
}

// warnWithoutWorkers says so above the bar when no worker polls the task
// queue: on a cluster, the run waits for `worker` processes.
func warnWithoutWorkers(ctx context.Context, c client.Client, taskQueue string, bar *progressBar) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(5 * time.Second):
	}
	resp, err := c.DescribeTaskQueue(ctx, taskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	if err == nil && len(resp.GetPollers()) == 0 {
		bar.notice("No worker polls task queue %q: start one with `go run ./worker --address …`.", taskQueue)
	}
}

// printWhere prints the run's links in the Temporal Web UI, when this
// process knows where that is.
func printWhere(s *session, cctx *cli.Context, runID string) {
	for _, line := range uiLinks(s.uiURL, cctx.String(wiring.FlagNamespace), runID) {
		fmt.Fprintln(os.Stderr, line)
	}
}

// uiLinks are the lines naming a run's workflow in the Temporal Web UI at
// ui and the list of every workflow of the run (its epochs too), found by
// the run id search attribute. No UI known, no lines.
func uiLinks(ui, namespace, runID string) []string {
	if ui == "" {
		return nil
	}
	return []string{
		"Temporal Web UI: " + run.WorkflowURL(ui, namespace, runID),
		"  every workflow of the run: " + run.ListURL(ui, namespace, runID),
	}
}

// prepareTasks builds the images of the taskset's tasks on the in-process
// worker before the run fans out, with a line of progress. A task whose
// Dockerfile does not build is named with the reason, and the run goes on
// without scoring it; the engine failing stops the run here.
func prepareTasks(ctx context.Context, s *session, taskset string) error {
	if s.worker == nil {
		return nil
	}
	shown := false
	refused, err := s.worker.PrepareTasks(ctx, taskset, func(done, total int) {
		shown = true
		fmt.Fprintf(os.Stderr, "\rPreparing the tasks' images: %d/%d", done, total)
	})
	if shown {
		fmt.Fprintln(os.Stderr)
	}
	printRefused(os.Stderr, refused)
	return err
}

// printRefused names each task that cannot run as configured, with why:
// the run goes on without it.
func printRefused(w io.Writer, refused []error) {
	for _, err := range refused {
		fmt.Fprintf(w, "refused: %v\n", err)
	}
	if len(refused) > 0 {
		fmt.Fprintf(w, "%d task(s) cannot run as configured: the run goes on without them; their rollouts are recorded as config errors and left out of the scores\n", len(refused))
	}
}

// statusHint is the command that shows a run's progress, with the flags
// that reach the run as this command did (its server, a namespace other
// than the default, its run store directory) before the run id, which ends
// a command's flags.
func statusHint(cctx *cli.Context, runID string) string {
	args := []string{"starter", "status"}
	for _, name := range []string{wiring.FlagAddress, wiring.FlagNamespace, wiring.FlagRunsDir} {
		if cctx.IsSet(name) && !(name == wiring.FlagNamespace && cctx.String(name) == "default") {
			args = append(args, "--"+name, shellQuote(cctx.String(name)))
		}
	}
	return strings.Join(append(args, shellQuote(runID)), " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:/@=+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
