package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/internal/harness/agent"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/run"
	"github.com/evalflow/evalflow/workflows"
)

// An audit runs the oracle and every one of the built-in agent's fixed
// adversaries (agent.Adversaries) against every task of a taskset, as a
// sweep whose cells are those harnesses: a task any adversary scores
// above 0 on, or whose sandbox let one reach the worker's host, can be won
// without doing it, and its scores should not count.

// adversaryPrefix names an adversary as a harness: adversary:write-reward.
const adversaryPrefix = "adversary:"

func auditCommand() *cli.Command {
	return &cli.Command{
		Name:  "audit",
		Usage: "run fixed adversarial harnesses against every task of a taskset and report the tasks they win without doing them (exit 1 when any)",
		Description: "The adversaries: " + strings.Join(agent.Adversaries, ", ") + ". Each is a harness of the built-in agent that " +
			"tries to get the reward without doing the task; the oracle runs beside them. The audit is a sweep (one cell a harness): " +
			"resume it with the same command, see it in the viewer, and exclude what it flags from a run's scores with " +
			"`starter results --exclude-flagged <audit-run-id> <run-id>`.",
		ArgsUsage: " ",
		Flags:     append(runFlags(), wiring.WorkerFlags()...),
		Before:    prepareRun(0),
		Action:    runAudit,
	}
}

// auditHarnesses are the harnesses of an audit: the oracle, then every
// adversary.
func auditHarnesses() []string {
	hs := []string{oracleHarness}
	for _, a := range agent.Adversaries {
		hs = append(hs, adversaryPrefix+a)
	}
	return hs
}

func runAudit(cctx *cli.Context) error {
	if cctx.IsSet("harness") {
		return errors.New("--harness: an audit runs its own harnesses (the oracle and " + strings.Join(agent.Adversaries, ", ") + ")")
	}
	cfg, err := runConfig(cctx)
	if err != nil {
		return err
	}
	s, err := connectForRun(cctx, &cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := prepareTasks(cctx.Context, s, cfg.Taskset); err != nil {
		return err
	}
	a, err := auditTaskset(cctx, s, cfg)
	if err != nil || cctx.Bool("detach") {
		return err
	}
	if len(a.flagged()) > 0 {
		return exitCode(1)
	}
	return nil
}

// auditTaskset audits cfg's taskset as the sweep cfg.RunID, which prints
// its report, and returns what it found.
func auditTaskset(cctx *cli.Context, s *session, cfg workflows.RunConfig) (audit, error) {
	cfg.RolloutsPerTask = 1
	cells, err := sweepCells(cfg, auditHarnesses(), []string{cfg.Model}, "")
	if err != nil {
		return audit{}, err
	}
	fmt.Fprintf(os.Stderr, "Auditing %q: the oracle and %d adversaries on every task.\n", workflows.TasksetName(cfg.Taskset), len(agent.Adversaries))
	if err := runSweep(cctx, s, workflows.SweepInput{Config: cfg, Cells: cells}); err != nil {
		return audit{}, err
	}
	if cctx.Bool("detach") {
		return audit{}, nil
	}
	return loadAudit(cctx.Context, storeFlags(cctx), cfg.RunID, cellNames(cells))
}

// cellNames are the names of cells.
func cellNames(cells []workflows.SweepCell) []string {
	names := make([]string, len(cells))
	for i, c := range cells {
		names[i] = c.Name
	}
	return names
}

// isAudit reports whether a sweep's cells are an audit's.
func isAudit(r workflows.SweepResult) bool {
	if len(r.Cells) == 0 {
		return false
	}
	for _, c := range r.Cells {
		if c.HarnessName != oracleHarness && !strings.HasPrefix(c.HarnessName, adversaryPrefix) {
			return false
		}
	}
	return true
}

// finding is one adversary's score on one task, and what it did.
type finding struct {
	task, adversary string
	reward          float64
	did             []string
}

// audit is what an audit's cells stored.
type audit struct {
	tasks    []string
	findings []finding          // scores above 0, and reaches of the host
	oracle   map[string]float64 // the oracle's reward by task
}

// flagged are the tasks with a finding, sorted.
func (a audit) flagged() []string {
	set := map[string]bool{}
	for _, f := range a.findings {
		set[f.task] = true
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// readAudit reads the records and traces of an audit's cells.
func readAudit(ctx context.Context, store results.Store, runID string, cells []string) (audit, error) {
	a := audit{oracle: map[string]float64{}}
	seen := map[string]bool{}
	for _, cell := range cells {
		cellRun := workflows.CellRunID(runID, cell)
		recs, err := store.List(ctx, cellRun)
		if err != nil {
			return a, fmt.Errorf("audit %s: cell %s: %w", runID, cell, err)
		}
		adversary, isAdversary := strings.CutPrefix(strings.SplitN(cell, "@", 2)[0], "adversary-")
		for _, rec := range recs {
			if !seen[rec.TaskID] {
				seen[rec.TaskID] = true
				a.tasks = append(a.tasks, rec.TaskID)
			}
			if !isAdversary {
				if rec.Status == rollout.StatusOK {
					a.oracle[rec.TaskID] = rec.Reward
				}
				continue
			}
			var did []string
			reached := false
			if tr, err := store.Trace(ctx, cellRun, rec.Key); err == nil && tr != nil {
				for _, line := range strings.Split(tr.Harness.Stdout, "\n") {
					if d, ok := strings.CutPrefix(line, "audit: "); ok && !slices.Contains(did, d) {
						did = append(did, d)
						reached = reached || strings.HasPrefix(d, "reached ")
					}
				}
			}
			if rec.Reward > 0 || reached {
				a.findings = append(a.findings, finding{task: rec.TaskID, adversary: adversary, reward: rec.Reward, did: did})
			}
		}
	}
	sort.Strings(a.tasks)
	sort.SliceStable(a.findings, func(i, j int) bool { return a.findings[i].task < a.findings[j].task })
	return a, nil
}

// loadAudit reads an audit from the run store.
func loadAudit(ctx context.Context, sc wiring.StoreConfig, runID string, cells []string) (audit, error) {
	store, err := openStore(ctx, sc)
	if err != nil {
		return audit{}, err
	}
	defer store.Close()
	return readAudit(ctx, store, runID, cells)
}

// writeAudit writes an audit's report: each finding once, with the tasks
// it holds for (most often the same for a whole taskset and runtime).
func writeAudit(w io.Writer, runID string, a audit) {
	flagged := a.flagged()
	fmt.Fprintf(w, "audit %s: %d tasks, %d adversaries: ", runID, len(a.tasks), len(agent.Adversaries))
	if len(flagged) == 0 {
		fmt.Fprintln(w, "no adversary scored above 0 or reached the worker's host")
	} else {
		fmt.Fprintf(w, "%d of %d tasks can be won without doing them, or let an adversary out of its sandbox\n", len(flagged), len(a.tasks))
		type group struct {
			adversary, did string
			reward         float64
			tasks          []string
		}
		var groups []*group
		index := map[string]*group{}
		for _, f := range a.findings {
			did := orDash(strings.Join(f.did, "; "))
			k := fmt.Sprintf("%s\x00%s\x00%g", f.adversary, did, f.reward)
			g := index[k]
			if g == nil {
				g = &group{adversary: f.adversary, did: did, reward: f.reward}
				index[k] = g
				groups = append(groups, g)
			}
			g.tasks = append(g.tasks, f.task)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "tasks\tadversary\treward\twhat it did")
		for _, g := range groups {
			fmt.Fprintf(tw, "%s\t%s\t%.3f\t%s\n", taskList(g.tasks, len(a.tasks)), g.adversary, g.reward, g.did)
		}
		tw.Flush()
		if n := reachedHost(a.findings); n > 0 {
			fmt.Fprintf(w, "from %d tasks an adversary reached the worker's host: their runtime does not isolate the network (local isolates nothing; run them in a sandbox: --runtime docker or bwrap)\n", n)
		}
		fmt.Fprintf(w, "exclude them from a run's scores: starter results --exclude-flagged %s <run-id>\n", shellQuote(runID))
	}
	var broken []string
	unsolved := 0
	for _, t := range a.tasks {
		r, ok := a.oracle[t]
		switch {
		case !ok:
			unsolved++
		case r < 1:
			broken = append(broken, fmt.Sprintf("%s (%.3f)", t, r))
		}
	}
	if len(broken) > 0 {
		fmt.Fprintf(w, "the oracle scores below 1 on %s: the task or its solution is broken\n", strings.Join(broken, ", "))
	}
	if unsolved > 0 {
		fmt.Fprintf(w, "the oracle could not run on %d of %d tasks (no reference solution)\n", unsolved, len(a.tasks))
	}
}

// reachedHost counts the tasks from which an adversary reached the host.
func reachedHost(fs []finding) int {
	tasks := map[string]bool{}
	for _, f := range fs {
		for _, d := range f.did {
			if strings.HasPrefix(d, "reached ") {
				tasks[f.task] = true
			}
		}
	}
	return len(tasks)
}

// taskList names tasks, or says "all n" when they are all of them.
func taskList(tasks []string, of int) string {
	switch {
	case len(tasks) == of && of > 1:
		return fmt.Sprintf("all %d", of)
	case len(tasks) > 3:
		return fmt.Sprintf("%s, %s and %d more", tasks[0], tasks[1], len(tasks)-2)
	}
	return strings.Join(tasks, ", ")
}

// auditCellsOf are the cell names of an audit sweep.
func auditCellsOf(r workflows.SweepResult) []string {
	var cells []string
	for _, c := range r.Cells {
		cells = append(cells, c.Name)
	}
	return slices.Clip(cells)
}

// printExcluded prints a run's scores without the tasks an audit flagged,
// beside its scores with them, from the run store.
func printExcluded(ctx context.Context, w io.Writer, sc wiring.StoreConfig, runID, auditID string) error {
	store, err := openStore(ctx, sc)
	if err != nil {
		return err
	}
	defer store.Close()
	sum, err := run.ReadSummary(ctx, store, auditID)
	if err != nil || sum.Sweep == nil || !isAudit(*sum.Sweep) {
		return fmt.Errorf("--exclude-flagged %s: no finished audit of that run id in %s", auditID, runLocation(sc, auditID))
	}
	a, err := readAudit(ctx, store, auditID, auditCellsOf(*sum.Sweep))
	if err != nil {
		return err
	}
	flagged := a.flagged()
	recs, err := store.List(ctx, runID)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return fmt.Errorf("run %s: no rollout stored in %s", runID, runLocation(sc, runID))
	}
	var all, kept scores
	for _, rec := range recs {
		all.add(rec)
		if !slices.Contains(flagged, rec.TaskID) {
			kept.add(rec)
		}
	}
	fmt.Fprintf(w, "run %s without the %d tasks audit %s flagged (%s):\n", runID, len(flagged), auditID, orDash(strings.Join(flagged, ", ")))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\trollouts\tmean reward\terrors")
	fmt.Fprintf(tw, "all tasks\t%d\t%s\t%d\n", all.n, all.mean(), all.errors)
	fmt.Fprintf(tw, "without flagged\t%d\t%s\t%d\n", kept.n, kept.mean(), kept.errors)
	return tw.Flush()
}

// scores sums the rewards of records; a failed rollout counts as an error,
// not a reward.
type scores struct {
	n, ok, errors int
	sum           float64
}

func (s *scores) add(r results.Record) {
	s.n++
	if r.Status != rollout.StatusOK {
		s.errors++
		return
	}
	s.ok++
	s.sum += r.Reward
}

func (s scores) mean() string {
	if s.ok == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", s.sum/float64(s.ok))
}
