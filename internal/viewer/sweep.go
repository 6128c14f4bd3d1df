package viewer

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/evalflow/evalflow/run"
	"github.com/evalflow/evalflow/workflows"
)

// KindSweep is a sweep's kind: a harness × model matrix of evaluations,
// each cell a run of its own.
const KindSweep = "sweep"

// Cell is one cell of a sweep, as its run page compares them side by side:
// from its rollouts stored so far, or its summary once it has finished.
type Cell struct {
	Name    string `json:"name"`
	RunID   string `json:"run_id"`
	Harness string `json:"harness,omitempty"`
	Model   string `json:"model,omitempty"`
	State   string `json:"state"`
	// Rollouts, OK and Failed count the cell's stored rollouts.
	Rollouts     int                   `json:"rollouts"`
	OK           int                   `json:"ok"`
	Failed       int                   `json:"failed"`
	MeanReward   float64               `json:"mean_reward"`
	StdReward    float64               `json:"std_reward"`
	PassAtK      []workflows.PassAt    `json:"pass_at_k"`
	Errors       []workflows.KindCount `json:"errors"`
	InputTokens  int64                 `json:"input_tokens"`
	OutputTokens int64                 `json:"output_tokens"`
	// CostUSD and UnpricedRollouts are the cell's cost (RunRow's).
	CostUSD          float64 `json:"cost_usd"`
	UnpricedRollouts int     `json:"unpriced_rollouts,omitempty"`
	// WallTime is the cell's, once it has finished.
	WallTime string `json:"wall_time,omitempty"`
	// Error is why the cell's evaluation failed.
	Error string `json:"error,omitempty"`
}

// cells are the cells of the sweep id, in the order of its summary when it
// has finished, else of their names: the store's runs named
// workflows.CellRunID(id, cell). A run that is no sweep has none.
func (v *Viewer) cells(ctx context.Context, id string, sweep *workflows.SweepResult) ([]Cell, error) {
	var ids []string
	if sweep != nil {
		for _, c := range sweep.Cells {
			ids = append(ids, c.RunID)
		}
	} else {
		all, err := v.store.Runs(ctx)
		if err != nil {
			return nil, err
		}
		prefix := workflows.CellRunID(id, "")
		for _, r := range all {
			if strings.HasPrefix(r, prefix) && !strings.Contains(r[len(prefix):], ":") {
				ids = append(ids, r)
			}
		}
		slices.Sort(ids)
	}
	var out []Cell
	for i, cellID := range ids {
		c := Cell{RunID: cellID, Name: strings.TrimPrefix(cellID, workflows.CellRunID(id, "")), State: StateRunning,
			PassAtK: []workflows.PassAt{}, Errors: []workflows.KindCount{}}
		if sweep != nil {
			sc := sweep.Cells[i]
			c.Name, c.Harness, c.Model, c.Error = sc.Name, sc.HarnessName, sc.Model, sc.Error
		}
		info, err := run.Load(ctx, v.store, cellID)
		switch {
		case errors.Is(err, run.ErrNotFound):
			out = append(out, c) // not started, or nothing stored yet
			continue
		case err != nil:
			return nil, err
		}
		r := row(cellID, info)
		c.State, c.Model = r.State, cmp.Or(c.Model, r.Model)
		c.Rollouts, c.OK, c.Failed, c.MeanReward = r.Rollouts, r.OK, r.Failed, r.MeanReward
		c.CostUSD, c.UnpricedRollouts = r.CostUSD, r.UnpricedRollouts
		c.StdReward = stdReward(info.Records, c.MeanReward)
		c.PassAtK, c.Errors = passAtK(info.Records, 1), errorKinds(info.Records)
		for _, rec := range info.Records {
			c.InputTokens += int64(rec.InputTokens)
			c.OutputTokens += int64(rec.OutputTokens)
		}
		if s := info.Summary; s != nil && s.Eval != nil {
			if len(s.Eval.PassAtK) > 0 {
				c.PassAtK = s.Eval.PassAtK
			}
			c.WallTime = s.Eval.WallTime
		}
		out = append(out, c)
	}
	return out, nil
}

// sumCells gives a sweep's row its cells' totals, and its models.
func (r *RunRow) sumCells(cells []Cell) {
	var rewards float64
	var models []string
	for _, c := range cells {
		r.Rollouts += c.Rollouts
		r.OK += c.OK
		r.Failed += c.Failed
		r.CostUSD += c.CostUSD
		r.UnpricedRollouts += c.UnpricedRollouts
		rewards += c.MeanReward * float64(c.Rollouts)
		if c.Model != "" && !slices.Contains(models, c.Model) {
			models = append(models, c.Model)
		}
	}
	r.Kind, r.Model = KindSweep, strings.Join(models, ", ")
	if r.Rollouts > 0 {
		r.MeanReward = rewards / float64(r.Rollouts)
	}
}
