// Package audit reads what an audit stored: a sweep whose cells are the
// oracle and the built-in agent's adversaries over one taskset (`starter
// audit`). A task an adversary scored above 0 on, or from whose sandbox
// one reached the worker's host, is flagged. The starter prints it and the
// viewer shows it.
package audit

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

// Oracle and AdversaryPrefix name an audit's harnesses: oracle, and
// adversary:<name> for each adversary.
const (
	Oracle          = "oracle"
	AdversaryPrefix = "adversary:"
)

// Finding is one adversary's score on one task, and what it said it did
// (its "audit: " lines).
type Finding struct {
	Task      string   `json:"task"`
	Adversary string   `json:"adversary"`
	Reward    float64  `json:"reward"`
	Did       []string `json:"did"`
}

// Reached reports whether the adversary reached the worker's host.
func (f Finding) Reached() bool {
	return slices.ContainsFunc(f.Did, func(d string) bool { return strings.HasPrefix(d, "reached ") })
}

// Report is what an audit's cells stored.
type Report struct {
	RunID string `json:"run_id"`
	// Tasks are the tasks audited, sorted.
	Tasks []string `json:"tasks"`
	// Findings are the scores above 0 and the reaches of the host, by task.
	Findings []Finding `json:"findings"`
	// Oracle is the oracle's reward by task, where it ran.
	Oracle map[string]float64 `json:"oracle"`
}

// Flagged are the tasks with a finding, sorted.
func (r Report) Flagged() []string {
	var out []string
	for _, f := range r.Findings {
		if !slices.Contains(out, f.Task) {
			out = append(out, f.Task)
		}
	}
	sort.Strings(out)
	return out
}

// IsAudit reports whether a sweep is an audit: every cell the oracle or an
// adversary.
func IsAudit(s workflows.SweepResult) bool {
	if len(s.Cells) == 0 {
		return false
	}
	for _, c := range s.Cells {
		if c.HarnessName != Oracle && !strings.HasPrefix(c.HarnessName, AdversaryPrefix) {
			return false
		}
	}
	return true
}

// Read reads the audit runID from its cells' records and traces.
func Read(ctx context.Context, store results.Store, s workflows.SweepResult) (Report, error) {
	r := Report{RunID: s.RunID, Oracle: map[string]float64{}, Findings: []Finding{}}
	seen := map[string]bool{}
	for _, cell := range s.Cells {
		adversary, isAdversary := strings.CutPrefix(cell.HarnessName, AdversaryPrefix)
		cellRun := workflows.CellRunID(s.RunID, cell.Name)
		recs, err := store.List(ctx, cellRun)
		if err != nil {
			return r, fmt.Errorf("audit %s: cell %s: %w", s.RunID, cell.Name, err)
		}
		for _, rec := range recs {
			if !seen[rec.TaskID] {
				seen[rec.TaskID] = true
				r.Tasks = append(r.Tasks, rec.TaskID)
			}
			if !isAdversary {
				if rec.Status == rollout.StatusOK {
					r.Oracle[rec.TaskID] = rec.Reward
				}
				continue
			}
			f := Finding{Task: rec.TaskID, Adversary: adversary, Reward: rec.Reward, Did: []string{}}
			if tr, err := store.Trace(ctx, cellRun, rec.Key); err == nil && tr != nil {
				for _, line := range strings.Split(tr.Harness.Stdout, "\n") {
					if d, ok := strings.CutPrefix(line, "audit: "); ok && !slices.Contains(f.Did, d) {
						f.Did = append(f.Did, d)
					}
				}
			}
			if rec.Reward > 0 || f.Reached() {
				r.Findings = append(r.Findings, f)
			}
		}
	}
	sort.Strings(r.Tasks)
	sort.SliceStable(r.Findings, func(i, j int) bool { return r.Findings[i].Task < r.Findings[j].Task })
	return r, nil
}
