package viewer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/evalflow/evalflow/internal/audit"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/run"
	"github.com/evalflow/evalflow/workflows"
)

// errBadRequest is a query the API cannot answer (a bad number, sort key).
var errBadRequest = errors.New("bad request")

// Run kinds, as the runs list shows them.
const (
	KindEval  = "eval"
	KindTrain = "train"
)

// Run states: a run with a summary has finished; one without is running,
// or was stopped and can be resumed.
const (
	StateFinished = "finished"
	StateRunning  = "running"
	// StateWaiting is a run id under which nothing is stored yet: a run
	// (a sweep's cells, say) that has started but stored no rollout, or
	// an id no run has.
	StateWaiting = "waiting"
)

// noRolloutYet is a waiting run's note.
const noRolloutYet = "no rollout stored yet: a run that has just started shows here once its first rollout is stored " +
	"(a sweep, once one of its cells has stored one); if it never does, check the run id with starter status"

// RunRow is a run as the runs list shows it.
type RunRow struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Model   string `json:"model,omitempty"`
	Taskset string `json:"taskset,omitempty"`
	State   string `json:"state"`
	// Counts count the rollouts stored so far, and what they cost.
	run.Counts
	// Stopped says why a finished run ran fewer rollouts than it asked
	// for (workflows.StoppedMaxRunCost).
	Stopped   string    `json:"stopped,omitempty"`
	StartedAt time.Time `json:"started_at,omitzero"`
	// UpdatedAt is when the last rollout was stored.
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// Run is one run's page: its row, figures, and for training runs its epochs.
type Run struct {
	RunRow
	// Tasks is the number of tasks the run asked for, once it has finished.
	Tasks     int64                 `json:"tasks,omitempty"`
	StdReward float64               `json:"std_reward"`
	Histogram []Bin                 `json:"histogram"`
	PassAtK   []workflows.PassAt    `json:"pass_at_k"`
	Errors    []workflows.KindCount `json:"errors"`
	Epochs    []Epoch               `json:"epochs,omitempty"`
	// Cells are a sweep's cells, side by side.
	Cells []Cell `json:"cells,omitempty"`
	// Audit is what an audit (a sweep of the oracle and the adversaries)
	// found, once it has finished.
	Audit *audit.Report `json:"audit,omitempty"`
	// TemporalURL links the run's workflow in the Temporal UI.
	TemporalURL string `json:"temporal_url,omitempty"`
	// Note says why a waiting run shows nothing yet.
	Note string `json:"note,omitempty"`
}

// Bin is one bar of the reward histogram: rollouts with Lo <= reward < Hi
// (the last bin includes Hi).
type Bin struct {
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
	Count int     `json:"count"`
}

// Epoch is one point of a training run's reward plot.
type Epoch struct {
	Epoch      int     `json:"epoch"`
	Rollouts   int64   `json:"rollouts"`
	Failed     int64   `json:"failed"`
	MeanReward float64 `json:"mean_reward"`
	StdReward  float64 `json:"std_reward"`
	// Finished is false for an epoch still running: its figures are the
	// rollouts stored so far.
	Finished bool `json:"finished"`
}

// Page is one page of a run's rollouts.
type Page struct {
	Total  int              `json:"total"`
	Offset int              `json:"offset"`
	Limit  int              `json:"limit"`
	Rows   []results.Record `json:"rows"`
}

// Rollout is one rollout's page: its record and every stored attempt.
type Rollout struct {
	Record      results.Record    `json:"record"`
	Attempts    []results.Attempt `json:"attempts"`
	TemporalURL string            `json:"temporal_url,omitempty"`
}

// row is a run's row from what the store holds of it.
func row(id string, info run.Stored) RunRow {
	r := RunRow{ID: id, Kind: KindEval, State: StateRunning, UpdatedAt: info.Modified, Counts: run.Count(info.Records)}
	if info.IsTrain() {
		r.Kind = KindTrain
	}
	for _, rec := range info.Records {
		if r.Model == "" {
			r.Model = rec.Model
		}
		if start := rec.FinishedAt.Add(-time.Duration(rec.DurationMS) * time.Millisecond); r.StartedAt.IsZero() || start.Before(r.StartedAt) {
			r.StartedAt = start
		}
	}
	if info.Summary != nil {
		r.State = StateFinished
	}
	if s := info.Summary; s != nil && s.Eval != nil {
		r.Model = cmp.Or(s.Eval.Model, r.Model)
		r.Taskset = workflows.TasksetName(s.Eval.Taskset)
		r.Stopped = s.Eval.Stopped
		if !s.Eval.StartedAt.IsZero() {
			r.StartedAt = s.Eval.StartedAt
		}
	}
	if s := info.Summary; s != nil && s.Sweep != nil {
		r.Kind, r.Taskset = KindSweep, workflows.TasksetName(s.Sweep.Taskset)
	}
	if last := info.LastEpoch; last != nil {
		// A training run's summary holds no taskset of its own; its
		// epochs' results name it.
		r.Model, r.Taskset = cmp.Or(r.Model, last.Run.Model), cmp.Or(r.Taskset, workflows.TasksetName(last.Run.Taskset))
	}
	return r
}

func (v *Viewer) runs(w http.ResponseWriter, r *http.Request) {
	ids, err := v.store.Runs(r.Context())
	if err != nil {
		v.writeJSON(w, nil, err)
		return
	}
	rows := []RunRow{}
	for _, id := range ids {
		info, err := run.Load(r.Context(), v.store, id)
		if err != nil {
			continue // a run being removed, or unreadable: the others still show
		}
		rr := row(id, info)
		if s := info.Summary; s != nil && s.Sweep != nil {
			cells, err := v.cells(r.Context(), id, s.Sweep)
			if err != nil {
				continue
			}
			rr.sumCells(cells)
		}
		rows = append(rows, rr)
	}
	// Newest first.
	slices.SortStableFunc(rows, func(a, b RunRow) int { return b.StartedAt.Compare(a.StartedAt) })
	v.writeJSON(w, rows, nil)
}

func (v *Viewer) run(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("run")
	if err := results.ValidateRunID(id); err != nil {
		v.writeJSON(w, nil, fmt.Errorf("%w: %w", errNotFound, err))
		return
	}
	info, err := run.Load(r.Context(), v.store, id)
	if err != nil && !errors.Is(err, run.ErrNotFound) {
		v.writeJSON(w, nil, err)
		return
	}
	var sweep *workflows.SweepResult
	if info.Summary != nil {
		sweep = info.Summary.Sweep
	}
	cells, cerr := v.cells(r.Context(), id, sweep)
	if cerr != nil {
		v.writeJSON(w, nil, cerr)
		return
	}
	if err != nil && len(cells) == 0 {
		// Nothing stored under the id, nor under a cell of it: the
		// viewer knows runs from the store only, so a run that has
		// just started is told from an id no run has by its first
		// rollout. A sweep still running has no summary yet: its cells
		// make it, once they store one.
		v.writeJSON(w, Run{RunRow: RunRow{ID: id, State: StateWaiting}, Note: noRolloutYet,
			Histogram: []Bin{}, PassAtK: []workflows.PassAt{}, Errors: []workflows.KindCount{}, TemporalURL: v.workflowURL(id)}, nil)
		return
	}
	out := Run{RunRow: row(id, info), Errors: errorKinds(info.Records), Histogram: histogram(info.Records, 10)}
	if len(cells) > 0 {
		out.Cells = cells
		out.sumCells(cells)
		out.Histogram = []Bin{}
	}
	if sweep != nil && audit.IsAudit(*sweep) {
		a, err := audit.Read(r.Context(), v.store, *sweep)
		if err != nil {
			v.writeJSON(w, nil, err)
			return
		}
		out.Audit = &a
	}
	out.StdReward = stdReward(info.Records, out.MeanReward)
	out.PassAtK = passAtK(info.Records, 1)
	if s := info.Summary; s != nil && s.Eval != nil && len(s.Eval.PassAtK) > 0 {
		out.PassAtK, out.Tasks = s.Eval.PassAtK, s.Eval.Tasks
	}
	if out.Kind == KindTrain {
		out.Epochs, err = v.epochs(r.Context(), id, info)
		if err != nil {
			v.writeJSON(w, nil, err)
			return
		}
	}
	out.TemporalURL = v.workflowURL(id)
	v.writeJSON(w, out, nil)
}

// epochs is one point per epoch: a finished epoch's recorded result, and
// for an epoch still running, the figures of its rollouts stored so far.
func (v *Viewer) epochs(ctx context.Context, id string, info run.Stored) ([]Epoch, error) {
	var out []Epoch
	for _, n := range info.Epochs {
		var res workflows.EpochResult
		if err := v.store.ReadEpoch(ctx, id, n, &res); err != nil {
			return nil, fmt.Errorf("read epoch %d of %s: %w", n, id, err)
		}
		out = append(out, Epoch{Epoch: n, Rollouts: res.Run.Rollouts, Failed: res.Run.Failed,
			MeanReward: res.Run.MeanReward, StdReward: res.Run.StdReward, Finished: true})
	}
	byEpoch := map[int][]results.Record{}
	for _, rec := range info.Records {
		if !slices.Contains(info.Epochs, rec.Epoch) {
			byEpoch[rec.Epoch] = append(byEpoch[rec.Epoch], rec)
		}
	}
	for n, recs := range byEpoch {
		c := run.Count(recs)
		e := Epoch{Epoch: n, Rollouts: int64(c.Rollouts), Failed: int64(c.Failed), MeanReward: c.MeanReward}
		e.StdReward = stdReward(recs, e.MeanReward)
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Epoch) int { return a.Epoch - b.Epoch })
	return out, nil
}

func stdReward(recs []results.Record, mean float64) float64 {
	if len(recs) == 0 {
		return 0
	}
	var ss float64
	for _, rec := range recs {
		ss += (rec.Reward - mean) * (rec.Reward - mean)
	}
	return math.Sqrt(ss / float64(len(recs)))
}

// errorKinds counts failed rollouts by error kind, most frequent first.
func errorKinds(recs []results.Record) []workflows.KindCount {
	counts := map[string]int64{}
	for _, rec := range recs {
		if rec.Status != rollout.StatusOK {
			counts[cmp.Or(rec.ErrorKind, "unknown")]++
		}
	}
	out := []workflows.KindCount{}
	for k, n := range counts {
		out = append(out, workflows.KindCount{Kind: k, Count: n})
	}
	slices.SortFunc(out, func(a, b workflows.KindCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Kind, b.Kind))
	})
	return out
}

// histogram bins the rewards of all stored rollouts into n equal bins over
// [min, max]; one bin when every reward is the same.
func histogram(recs []results.Record, n int) []Bin {
	if len(recs) == 0 {
		return []Bin{}
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, rec := range recs {
		lo, hi = min(lo, rec.Reward), max(hi, rec.Reward)
	}
	if lo == hi {
		return []Bin{{Lo: lo, Hi: hi, Count: len(recs)}}
	}
	if lo >= 0 && hi <= 1 {
		lo, hi = 0, 1 // the usual reward range: bins at tenths
	}
	bins := make([]Bin, n)
	width := (hi - lo) / float64(n)
	for i := range bins {
		bins[i].Lo, bins[i].Hi = lo+float64(i)*width, lo+float64(i+1)*width
	}
	for _, rec := range recs {
		i := min(int((rec.Reward-lo)/width), n-1)
		bins[i].Count++
	}
	return bins
}

// passAtK estimates pass@k from the stored rollouts, over the tasks of each
// epoch whose rollouts are all in, a pass being a success at or above
// threshold (the run's default pass threshold). A finished run's summary
// has the figure with the run's own threshold.
func passAtK(recs []results.Record, threshold float64) []workflows.PassAt {
	type task struct {
		epoch int
		index int64
	}
	type tally struct{ n, c int }
	tallies := map[task]*tally{}
	group := 0
	for _, rec := range recs {
		t := task{rec.Epoch, rec.Index}
		if tallies[t] == nil {
			tallies[t] = &tally{}
		}
		tallies[t].n++
		if rec.Status == rollout.StatusOK && rec.Reward >= threshold {
			tallies[t].c++
		}
		group = max(group, rec.K+1)
	}
	out := []workflows.PassAt{}
	for k := 1; k <= group; k++ {
		var sum float64
		var done int
		for _, t := range tallies {
			if t.n == group {
				sum += workflows.PassAtK(t.n, t.c, k)
				done++
			}
		}
		if done > 0 {
			out = append(out, workflows.PassAt{K: k, Value: sum / float64(done)})
		}
	}
	return out
}

// rollouts serves a page of a run's rollouts, filtered and sorted:
// status (ok|error), error_kind, min_reward, max_reward, q (a substring of
// the key or task id), sort (key, reward, duration, turns, finished; a
// leading "-" for descending), offset and limit (at most 500).
func (v *Viewer) rollouts(w http.ResponseWriter, r *http.Request) {
	page, err := v.page(r.Context(), r.PathValue("run"), r.URL.Query())
	v.writeJSON(w, page, err)
}

func (v *Viewer) page(ctx context.Context, id string, q url.Values) (Page, error) {
	num := func(name string, def float64) (float64, error) {
		s := q.Get(name)
		if s == "" {
			return def, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) {
			return 0, fmt.Errorf("%w: %s=%q is not a number", errBadRequest, name, s)
		}
		return f, nil
	}
	minR, err := num("min_reward", math.Inf(-1))
	if err != nil {
		return Page{}, err
	}
	maxR, err := num("max_reward", math.Inf(1))
	if err != nil {
		return Page{}, err
	}
	offset, err := num("offset", 0)
	if err != nil {
		return Page{}, err
	}
	limit, err := num("limit", 50)
	if err != nil {
		return Page{}, err
	}
	if offset < 0 || limit < 1 {
		return Page{}, fmt.Errorf("%w: offset must be >= 0 and limit >= 1", errBadRequest)
	}
	limit = min(limit, 500)
	less, err := sorter(q.Get("sort"))
	if err != nil {
		return Page{}, err
	}

	info, err := run.Load(ctx, v.store, id)
	if err != nil {
		return Page{}, err
	}
	status, kind, text := q.Get("status"), q.Get("error_kind"), q.Get("q")
	rows := make([]results.Record, 0, len(info.Records))
	for _, rec := range info.Records {
		switch {
		case status != "" && rec.Status != status,
			kind != "" && (rec.Status == rollout.StatusOK || cmp.Or(rec.ErrorKind, "unknown") != kind),
			rec.Reward < minR || rec.Reward > maxR,
			text != "" && !strings.Contains(rec.Key, text) && !strings.Contains(rec.TaskID, text):
			continue
		}
		rows = append(rows, rec)
	}
	slices.SortStableFunc(rows, less)
	p := Page{Total: len(rows), Offset: int(offset), Limit: int(limit), Rows: []results.Record{}}
	if p.Offset < len(rows) {
		p.Rows = rows[p.Offset:min(p.Offset+p.Limit, len(rows))]
	}
	return p, nil
}

// sorter orders records by a sort key of the rollouts API.
func sorter(key string) (func(a, b results.Record) int, error) {
	desc := strings.HasPrefix(key, "-")
	key = strings.TrimPrefix(key, "-")
	var by func(a, b results.Record) int
	switch key {
	case "", "key":
		by = func(a, b results.Record) int {
			return cmp.Or(cmp.Compare(a.Epoch, b.Epoch), cmp.Compare(a.Index, b.Index), cmp.Compare(a.K, b.K), strings.Compare(a.Key, b.Key))
		}
	case "reward":
		by = func(a, b results.Record) int { return cmp.Compare(a.Reward, b.Reward) }
	case "duration":
		by = func(a, b results.Record) int { return cmp.Compare(a.DurationMS, b.DurationMS) }
	case "turns":
		by = func(a, b results.Record) int { return cmp.Compare(a.Turns, b.Turns) }
	case "finished":
		by = func(a, b results.Record) int { return a.FinishedAt.Compare(b.FinishedAt) }
	case "status":
		by = func(a, b results.Record) int {
			return cmp.Or(strings.Compare(a.Status, b.Status), strings.Compare(a.ErrorKind, b.ErrorKind))
		}
	default:
		return nil, fmt.Errorf("%w: cannot sort by %q", errBadRequest, key)
	}
	if desc {
		return func(a, b results.Record) int { return by(b, a) }, nil
	}
	return by, nil
}

// rollout serves a rollout's record and every attempt of it (?key=...).
func (v *Viewer) rollout(w http.ResponseWriter, r *http.Request) {
	id, key := r.PathValue("run"), r.URL.Query().Get("key")
	rec, ok, err := v.store.Get(r.Context(), id, key)
	if err == nil && !ok {
		err = fmt.Errorf("rollout %s: %w", key, errNotFound)
	}
	if err != nil {
		v.writeJSON(w, nil, err)
		return
	}
	attempts, err := v.store.Attempts(r.Context(), id, key)
	if err != nil {
		v.writeJSON(w, nil, err)
		return
	}
	v.redactArtifacts(attempts)
	out := Rollout{Record: rec, Attempts: attempts, TemporalURL: v.workflowURL(id)}
	if rec.Epoch > 0 || v.isTrain(r.Context(), id) {
		out.TemporalURL = v.workflowURL(workflows.EpochID(id, rec.Epoch))
	}
	v.writeJSON(w, out, nil)
}

func (v *Viewer) isTrain(ctx context.Context, id string) bool {
	epochs, err := v.store.Epochs(ctx, id)
	return err == nil && len(epochs) > 0
}

// workflowURL links a workflow in the Temporal UI, if its address is known.
func (v *Viewer) workflowURL(workflowID string) string {
	return run.WorkflowURL(v.opts.TemporalUI, v.opts.Namespace, workflowID)
}
