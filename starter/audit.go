package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/internal/audit"
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
const adversaryPrefix = audit.AdversaryPrefix

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
	if len(a.Flagged()) > 0 {
		return exitCode(1)
	}
	return nil
}

// auditTaskset audits cfg's taskset as the sweep cfg.RunID, which prints
// its report, and returns what it found.
func auditTaskset(cctx *cli.Context, s *session, cfg workflows.RunConfig) (audit.Report, error) {
	cfg.RolloutsPerTask = 1
	cells, err := sweepCells(cfg, auditHarnesses(), []string{cfg.Model}, "")
	if err != nil {
		return audit.Report{}, err
	}
	fmt.Fprintf(os.Stderr, "Auditing %q: the oracle and %d adversaries on every task.\n", workflows.TasksetName(cfg.Taskset), len(agent.Adversaries))
	if err := runSweep(cctx, s, workflows.SweepInput{Config: cfg, Cells: cells}); err != nil {
		return audit.Report{}, err
	}
	if cctx.Bool("detach") {
		return audit.Report{}, nil
	}
	sweep := workflows.SweepResult{RunID: cfg.RunID}
	for _, c := range cells {
		sweep.Cells = append(sweep.Cells, workflows.CellResult{Name: c.Name, HarnessName: c.HarnessName})
	}
	return loadAudit(cctx.Context, storeFlags(cctx), sweep)
}

// loadAudit reads an audit from the run store.
func loadAudit(ctx context.Context, sc wiring.StoreConfig, sweep workflows.SweepResult) (audit.Report, error) {
	store, err := openStore(ctx, sc)
	if err != nil {
		return audit.Report{}, err
	}
	defer store.Close()
	return audit.Read(ctx, store, sweep)
}

// writeAudit writes an audit's report: each finding once, with the tasks
// it holds for (most often the same for a whole taskset and runtime).
func writeAudit(w io.Writer, runID string, a audit.Report) {
	flagged := a.Flagged()
	fmt.Fprintf(w, "audit %s: %d tasks, %d adversaries: ", runID, len(a.Tasks), len(agent.Adversaries))
	if len(flagged) == 0 {
		fmt.Fprintln(w, "no adversary scored above 0 or reached the worker's host")
	} else {
		fmt.Fprintf(w, "%d of %d tasks can be won without doing them, or let an adversary out of its sandbox\n", len(flagged), len(a.Tasks))
		type group struct {
			adversary, did string
			reward         float64
			tasks          []string
		}
		var groups []*group
		index := map[string]*group{}
		for _, f := range a.Findings {
			did := orDash(strings.Join(f.Did, "; "))
			k := fmt.Sprintf("%s\x00%s\x00%g", f.Adversary, did, f.Reward)
			g := index[k]
			if g == nil {
				g = &group{adversary: f.Adversary, did: did, reward: f.Reward}
				index[k] = g
				groups = append(groups, g)
			}
			g.tasks = append(g.tasks, f.Task)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "tasks\tadversary\treward\twhat it did")
		for _, g := range groups {
			fmt.Fprintf(tw, "%s\t%s\t%.3f\t%s\n", taskList(g.tasks, len(a.Tasks)), g.adversary, g.reward, g.did)
		}
		tw.Flush()
		if n := reachedHost(a.Findings); n > 0 {
			fmt.Fprintf(w, "from %d tasks an adversary reached the worker's host: their runtime does not isolate the network (local isolates nothing; run them in a sandbox: --runtime docker or bwrap)\n", n)
		}
		fmt.Fprintf(w, "exclude them from a run's scores: starter results --exclude-flagged %s <run-id>\n", shellQuote(runID))
	}
	var broken []string
	unsolved := 0
	for _, t := range a.Tasks {
		r, ok := a.Oracle[t]
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
		fmt.Fprintf(w, "the oracle could not run on %d of %d tasks (no reference solution)\n", unsolved, len(a.Tasks))
	}
}

// reachedHost counts the tasks from which an adversary reached the host.
func reachedHost(fs []audit.Finding) int {
	tasks := map[string]bool{}
	for _, f := range fs {
		if f.Reached() {
			tasks[f.Task] = true
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

// printExcluded prints a run's scores without the tasks an audit flagged,
// beside its scores with them, from the run store.
func printExcluded(ctx context.Context, w io.Writer, sc wiring.StoreConfig, runID, auditID string) error {
	store, err := openStore(ctx, sc)
	if err != nil {
		return err
	}
	defer store.Close()
	sum, err := run.ReadSummary(ctx, store, auditID)
	if err != nil || sum.Sweep == nil || !audit.IsAudit(*sum.Sweep) {
		return fmt.Errorf("--exclude-flagged %s: no finished audit of that run id in %s", auditID, runLocation(sc, auditID))
	}
	a, err := audit.Read(ctx, store, *sum.Sweep)
	if err != nil {
		return err
	}
	flagged := a.Flagged()
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
