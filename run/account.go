package run

import (
	"context"
	"slices"
	"time"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/workflows"
)

// Account tells what a run reused from what it ran by the run store's
// records before it started and after it ended. A workflow counts as ran
// every rollout its own execution finished, so a run resumed while still
// running (after Ctrl-C) would report its earlier rollouts as run again;
// and what the store held when the starter re-attached to a running run
// was partly run by that very execution (AttachedSince).
type Account struct {
	store results.Store
	runID string
	// before is the store's records by key; nil when the store could not
	// be read, and then the workflow's own counts stand.
	before map[string]results.Record
	// since is when the execution attached to started, for a run that was
	// running already: what it stored before the account was taken it ran
	// itself, and is no reuse.
	since time.Time
}

// AttachedSince tells the account that the run was running already, its
// execution started at start: records stored from then on were run by
// it, though they were in the store when the account was taken.
func (a *Account) AttachedSince(start time.Time) {
	if a != nil {
		a.since = start
	}
}

// NewAccount reads what store holds for a run now. A nil store can tell
// nothing: the workflow's counts stand.
func NewAccount(ctx context.Context, store results.Store, runID string) *Account {
	a := &Account{store: store, runID: runID}
	if store == nil {
		return a
	}
	if recs, err := store.List(ctx, runID); err == nil {
		a.before = make(map[string]results.Record, len(recs))
		for _, r := range recs {
			a.before[r.Key] = r
		}
	}
	return a
}

// epochCount is what one epoch reused and ran.
type epochCount struct{ ran, reused int64 }

// counts compares the store now with before, per epoch: a record stored
// before and unchanged was reused, one added or replaced since (a failure
// run again) was run. ok is false when the store cannot tell: it could not
// be read, or holds nothing of the run (workers with another store).
func (a *Account) counts(ctx context.Context) (map[int]epochCount, bool) {
	if a == nil || a.before == nil {
		return nil, false
	}
	after, err := a.store.List(ctx, a.runID)
	if err != nil || len(after) == 0 {
		return nil, false
	}
	counts := map[int]epochCount{}
	for _, r := range after {
		c := counts[r.Epoch]
		b, held := a.before[r.Key]
		if held && b.Attempt == r.Attempt && b.Status == r.Status && b.FinishedAt.Equal(r.FinishedAt) &&
			(a.since.IsZero() || b.FinishedAt.Before(a.since)) {
			c.reused++
		} else {
			c.ran++
		}
		counts[r.Epoch] = c
	}
	return counts, true
}

// Train sets a training run's ran and reused counts, per epoch and in
// total, to the store's where it can tell, and rewrites the run's summary
// with them so that the stored summary says the same.
func (a *Account) Train(ctx context.Context, r *workflows.TrainResult) {
	counts, ok := a.counts(ctx)
	if !ok {
		return
	}
	for i, e := range r.Epochs {
		if c, ok := counts[e.Epoch]; ok {
			r.Epochs[i].Ran, r.Epochs[i].Run.Reused = c.ran, c.reused
		}
	}
	r.Ran, r.Reused = 0, 0
	for epoch, c := range counts {
		r.Ran += c.ran
		if !slices.Contains(r.Skipped, epoch) {
			r.Reused += c.reused
		}
	}
	// Failing that, the result still has the store's counts.
	_ = a.store.WriteSummary(ctx, a.runID, r)
}

// Eval sets an evaluation's reused count to the store's, and rewrites the
// run's summary with it.
func (a *Account) Eval(ctx context.Context, r *workflows.Result) {
	counts, ok := a.counts(ctx)
	if !ok {
		return
	}
	r.Reused = 0
	for _, c := range counts {
		r.Reused += c.reused
	}
	_ = a.store.WriteSummary(ctx, a.runID, r)
}
