package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-shellwords"
	"github.com/urfave/cli/v2"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/audit"
	"github.com/evalflow/evalflow/internal/harness/packaged"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/run"
	"github.com/evalflow/evalflow/workflows"
)

// matrix reads the harnesses and models of --harness and --model, each a
// comma-separated list: more than one of either makes the run a sweep.
// No --model is the offline mock's.
func matrix(cctx *cli.Context) (harnesses, models []string, err error) {
	if harnesses, err = splitList(cctx.String("harness")); err != nil {
		return nil, nil, fmt.Errorf("--harness: %w", err)
	}
	if models, err = splitList(cctx.String("model")); err != nil {
		return nil, nil, fmt.Errorf("--model: %w", err)
	}
	if len(harnesses) == 0 {
		harnesses = []string{""} // the built-in agent
	}
	if len(models) == 0 {
		if cctx.String(wiring.FlagBaseURL) != "" {
			return nil, nil, fmt.Errorf("--model is required with --base-url")
		}
		models = []string{mockModel}
	}
	if (len(harnesses) > 1 || len(models) > 1) && (cctx.Command == nil || cctx.Command.Name != "eval") {
		return nil, nil, fmt.Errorf("--harness %q --model %q: a list of harnesses or models is a sweep, which `starter eval` runs; give one of each here", cctx.String("harness"), cctx.String("model"))
	}
	return harnesses, models, nil
}

// splitList splits s at its commas outside quotes (a harness's command
// line may quote one) and trims each item. An empty s is no item; an empty
// item or a repeated one is refused.
func splitList(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var items []string
	var quote rune
	start := 0
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == ',':
			items = append(items, s[start:i])
			start = i + 1
		}
	}
	items = append(items, s[start:])
	for i, item := range items {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("%q has an empty item: separate the values with single commas, e.g. a,b", s)
		}
		for _, earlier := range items[:i] {
			if earlier == item {
				return nil, fmt.Errorf("%q names %q twice", s, item)
			}
		}
		items[i] = item
	}
	return items, nil
}

// harnessName is a --harness value as a sweep names its cells and the
// Temporal UI filters them: the built-in agent is "agent", a packaged
// harness and the oracle their names, a command line its first two words
// (their base names; env and words setting a variable left out).
func harnessName(h string) string {
	if h == "" {
		return builtinHarness
	}
	if _, ok := packaged.Lookup(h); ok || h == oracleHarness || strings.HasPrefix(h, adversaryPrefix) {
		return h
	}
	argv, err := shellwords.Parse(h)
	if err != nil {
		return "command"
	}
	// The name reaches run ids, search attributes and logs: a word that
	// sets a variable (env KEY=value …) may hold a secret, and is left
	// out with the env that sets it.
	var words []string
	for _, w := range argv {
		if w == "env" || strings.Contains(w, "=") {
			continue
		}
		words = append(words, filepath.Base(w))
	}
	if len(words) == 0 {
		return "command"
	}
	return strings.Join(words[:min(2, len(words))], " ")
}

// cellName names the cell of a harness and a model: harness@model, each
// with what a run id cannot hold (see results.ValidateRunID) turned into
// '-', e.g. "python agent.py" and "openai/gpt-4.1" make
// python-agent.py@openai-gpt-4.1.
func cellName(harness, model string) string {
	clean := func(s string) string {
		var b strings.Builder
		dash := false
		for _, r := range s {
			ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.+=", r)
			switch {
			case ok:
				b.WriteRune(r)
				dash = false
			case !dash:
				b.WriteByte('-')
				dash = true
			}
		}
		return strings.Trim(b.String(), "-")
	}
	return clean(harness) + "@" + clean(model)
}

// sweepCells are the cells of the harnesses × models matrix, harness by
// harness, each running cfg with its own harness and model. Two cells
// whose names would be the same get a number each after the first.
func sweepCells(cfg workflows.RunConfig, harnesses, models []string, version string) ([]workflows.SweepCell, error) {
	var cells []workflows.SweepCell
	seen := map[string]int{}
	for _, h := range harnesses {
		hc, err := withHarness(cfg.Harness, h, version)
		if err != nil {
			return nil, err
		}
		for _, m := range models {
			name := cellName(harnessName(h), m)
			if seen[name]++; seen[name] > 1 {
				name = fmt.Sprintf("%s-%d", name, seen[name])
			}
			if err := results.ValidateRunID(workflows.CellRunID(cfg.RunID, name)); err != nil {
				return nil, fmt.Errorf("cell %s of run %s: %w; give a shorter --run-id", name, cfg.RunID, err)
			}
			cells = append(cells, workflows.SweepCell{Name: name, HarnessName: harnessName(h), Harness: hc, Model: m})
		}
	}
	return cells, nil
}

// sweepInput is the sweep the flags ask for, or false when they name one
// harness and one model: a plain evaluation.
func sweepInput(cctx *cli.Context, cfg workflows.RunConfig) (workflows.SweepInput, bool, error) {
	harnesses, models, err := matrix(cctx)
	if err != nil || len(harnesses) == 1 && len(models) == 1 {
		return workflows.SweepInput{}, false, err
	}
	cells, err := sweepCells(cfg, harnesses, models, cctx.String("harness-version"))
	return workflows.SweepInput{Config: cfg, Cells: cells}, true, err
}

// runSweep starts the sweep, or attaches to the one with its run id, and
// watches its cells until every one has ended.
func runSweep(cctx *cli.Context, s *session, in workflows.SweepInput) error {
	ctx := cctx.Context
	cfg, cells := in.Config, in.Cells
	// The cells the sweep under this run id had, if any: a rerun with
	// other lists says what it changes.
	was, _ := run.ReadSweep(ctx, s.client, cfg.RunID)
	a, err := run.AttachSweep(ctx, s.client, cctx.String(wiring.FlagTaskQueue), in)
	var changed *run.ChangedError
	if errors.As(err, &changed) {
		return changedError(changed, "use a new --run-id, or go on with these tasks: starter resume "+cfg.RunID+" --force with the same flags")
	}
	if err != nil {
		return err
	}
	if a.Prior == 0 {
		fmt.Fprintf(os.Stderr, "Starting sweep %s: %d cells (%s), each %d tasks × %d rollouts of %q.\n",
			cfg.RunID, len(in.Cells), workflows.CellNames(in.Cells), cfg.Tasks, cfg.RolloutsPerTask, workflows.TasksetName(cfg.Taskset))
	} else if a.Prior == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		if len(was.Cells) > 0 {
			in = was // its own cells are the ones to watch
		}
		attachedSweep(os.Stderr, cfg.RunID, was.Cells, cells)
	} else if !a.Done() {
		fmt.Fprintf(os.Stderr, "Sweep %s: resuming every cell; finished rollouts are reused from the store.\n", cfg.RunID)
		if a.Started != nil {
			restartedSweep(os.Stderr, cfg.RunID, was.Cells, cells)
		}
	}
	warnStarted(a.Started)
	printWhere(s, cctx, cfg.RunID)
	defer startViewer(cctx, s.uiURL)()
	if a.Done() {
		fmt.Fprintf(os.Stderr, "Sweep %s has already finished (add --retry-failed to rerun its failed rollouts).\n", cfg.RunID)
		return printResult(ctx, s.client, cctx, cfg.RunID)
	}
	if cctx.Bool("detach") {
		fmt.Printf("Started sweep %s. Its results: starter results %s\n", cfg.RunID, shellQuote(cfg.RunID))
		return nil
	}
	bar := newProgressBar(os.Stderr)
	res, err := watchSweep(ctx, s.client, in, bar)
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "\nStopped watching. Sweep %s is saved; continue every cell with the same command and --run-id %s\n", cfg.RunID, cfg.RunID)
		return exitCode(130)
	}
	if err != nil {
		return fmt.Errorf("sweep %s failed: %w", cfg.RunID, err)
	}
	printSweepSummary(os.Stdout, res, storeFlags(cctx))
	return sweepError(res)
}

// attachedSweep says that the sweep runID is already running, and which
// cells it has when they are not those asked for: its own cells apply.
func attachedSweep(w io.Writer, runID string, running, asked []workflows.SweepCell) {
	added, dropped := cellChanges(running, asked)
	if len(running) == 0 || len(added) == 0 && len(dropped) == 0 {
		fmt.Fprintf(w, "Sweep %s is already running: watching it (its own cells apply).\n", runID)
		return
	}
	fmt.Fprintf(w, "Sweep %s is already running with other cells: watching its own (%s), not those asked for (%s).\n"+
		"To run the others, wait for it to end and run this command again, or give a new --run-id.\n",
		runID, workflows.CellNames(running), workflows.CellNames(asked))
}

// restartedSweep says which cells a sweep started again with other lists
// added and dropped; a dropped cell's rollouts stay stored under its own
// run id.
func restartedSweep(w io.Writer, runID string, was, now []workflows.SweepCell) {
	if len(was) == 0 {
		return
	}
	added, dropped := cellChanges(was, now)
	if len(added) > 0 {
		fmt.Fprintf(w, "Sweep %s: cells added: %s (they start with no stored rollouts).\n", runID, strings.Join(added, ", "))
	}
	if len(dropped) > 0 {
		fmt.Fprintf(w, "Sweep %s: cells dropped: %s (their stored rollouts stay in the store, e.g. starter results %s).\n",
			runID, strings.Join(dropped, ", "), shellQuote(workflows.CellRunID(runID, dropped[0])))
	}
}

// cellChanges are the names of the cells of now that was lacks (added) and
// of those of was that now lacks (dropped), each in its list's order.
func cellChanges(was, now []workflows.SweepCell) (added, dropped []string) {
	has := func(cells []workflows.SweepCell, name string) bool {
		return slices.ContainsFunc(cells, func(c workflows.SweepCell) bool { return c.Name == name })
	}
	for _, c := range now {
		if !has(was, c.Name) {
			added = append(added, c.Name)
		}
	}
	for _, c := range was {
		if !has(now, c.Name) {
			dropped = append(dropped, c.Name)
		}
	}
	return added, dropped
}

// watchResumedSweep watches a sweep `starter resume` found or started
// again until every cell has ended, and prints the cells side by side.
func watchResumedSweep(ctx context.Context, c client.Client, runID string, sc wiring.StoreConfig) error {
	in, err := run.ReadSweep(ctx, c, runID)
	if err != nil {
		return err
	}
	res, err := watchSweep(ctx, c, in, newProgressBar(os.Stderr))
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "\nStopped watching. Continue with: starter resume %s\n", runID)
		return exitCode(130)
	}
	if err != nil {
		return fmt.Errorf("sweep %s failed: %w", runID, err)
	}
	printSweepSummary(os.Stdout, res, sc)
	return sweepError(res)
}

// sweepError is an error naming the cells that failed, nil when none did.
func sweepError(res workflows.SweepResult) error {
	var failed []string
	for _, c := range res.Cells {
		if c.Error != "" {
			failed = append(failed, c.Name)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("sweep %s: cells %s failed (their errors are above); fix the cause and run `starter resume %s`", res.RunID, strings.Join(failed, ", "), res.RunID)
}

// watchSweep draws the cells' progress, summed, until the sweep ends and
// returns its result.
func watchSweep(ctx context.Context, c client.Client, in workflows.SweepInput, bar *progressBar) (workflows.SweepResult, error) {
	type outcome struct {
		res workflows.SweepResult
		err error
	}
	end := make(chan outcome, 1)
	go func() {
		var o outcome
		o.err = c.GetWorkflow(ctx, in.Config.RunID, "").Get(ctx, &o.res)
		end <- o
	}()
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case o := <-end:
			bar.draw(run.SweepProgress(context.WithoutCancel(ctx), c, in))
			bar.finish()
			if ctx.Err() != nil {
				return o.res, ctx.Err()
			}
			return o.res, o.err
		case <-t.C:
			bar.draw(run.SweepProgress(ctx, c, in))
		}
	}
}

// printSweepSummary writes a finished sweep's cells side by side: one row
// per cell.
func printSweepSummary(w io.Writer, r workflows.SweepResult, sc wiring.StoreConfig) {
	fmt.Fprintf(w, "sweep %s: %d cells over %s, wall time %s\n", r.RunID, len(r.Cells), workflows.TasksetName(r.Taskset), r.WallTime)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "cell\tharness\tmodel\trollouts\tmean reward\tpass@k\terrors\ttokens in/out\tcost\twall time")
	for _, c := range r.Cells {
		res := c.Result
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.3f ± %.3f\t%s\t%s\t%d/%d\t%s\t%s\n",
			c.Name, c.HarnessName, c.Model, res.Rollouts, res.MeanReward, res.StdReward,
			passAtKs(res.PassAtK), cellErrors(res), res.InputTokens, res.OutputTokens, cellCost(res), orDash(res.WallTime))
	}
	tw.Flush()
	for _, c := range r.Cells {
		if c.Error != "" {
			fmt.Fprintf(w, "cell %s failed: %s\n", c.Name, c.Error)
		}
	}
	fmt.Fprintf(w, "each cell is a run of its own (starter results <run-id>:<cell>): %s\n", runLocation(sc, workflows.CellRunID(r.RunID, "<cell>")))
	if audit.IsAudit(r) {
		if a, err := loadAudit(context.Background(), sc, r); err != nil {
			fmt.Fprintf(w, "audit %s: %v\n", r.RunID, err)
		} else {
			writeAudit(w, r.RunID, a)
		}
	}
}

// passAtKs is a cell's pass@1, pass@2, … as "0.500 0.750".
func passAtKs(ps []workflows.PassAt) string {
	if len(ps) == 0 {
		return "-"
	}
	vs := make([]string, len(ps))
	for i, p := range ps {
		vs[i] = fmt.Sprintf("%.3f", p.Value)
	}
	return strings.Join(vs, " ")
}

// cellErrors is a cell's failed rollouts, by kind.
func cellErrors(r workflows.Result) string {
	s := fmt.Sprint(r.Failed)
	var kinds []string
	for _, e := range r.Errors {
		kinds = append(kinds, fmt.Sprintf("%s %d", e.Kind, e.Count))
	}
	if len(kinds) > 0 {
		s += " (" + strings.Join(kinds, ", ") + ")"
	}
	return s
}

// cellCost is a cell's cost, with a '+' when some of its rollouts had a
// model without a price.
func cellCost(r workflows.Result) string {
	s := fmt.Sprintf("$%.4f", r.CostUSD)
	if r.UnpricedRollouts > 0 {
		s += fmt.Sprintf(" (+%d unpriced)", r.UnpricedRollouts)
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
