package main

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"github.com/urfave/cli/v2"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/wiring"
	"github.com/evalflow/evalflow/workflows"
)

// startInput reads the input a run's execution was started with.
func startInput(ctx context.Context, c client.Client, workflowID, runID string) (workflows.TrainInput, error) {
	var in workflows.TrainInput
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return in, fmt.Errorf("run %s has no history", workflowID)
	}
	ev, err := it.Next()
	if err != nil {
		return in, fmt.Errorf("read history of %s: %w", workflowID, err)
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return in, fmt.Errorf("run %s: history does not start with the run's input", workflowID)
	}
	if err := converter.GetDefaultDataConverter().FromPayloads(attrs.GetInput(), &in); err != nil {
		return in, fmt.Errorf("decode the input of %s: %w", workflowID, err)
	}
	in.State = nil // a resume starts from the run store, not from a dead run's memory
	return in, nil
}

// configChange is a run's stored input with the flags given on the command
// line applied, and the settings they changed.
type configChange struct {
	input  workflows.TrainInput
	fields []string
}

// changedConfig applies the flags set on the command line to the stored input.
func changedConfig(cctx *cli.Context, old workflows.TrainInput) (configChange, error) {
	given, err := runConfig(cctx)
	if err != nil {
		return configChange{}, err
	}
	given.RunID = old.Config.RunID
	ch := configChange{input: old}
	cfg, train := &ch.input.Config, &ch.input.Train
	apply := func(flag string, dst, src any) {
		if !cctx.IsSet(flag) {
			return
		}
		d, s := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
		if !reflect.DeepEqual(d.Interface(), s.Interface()) {
			if !slices.Contains(ch.fields, "--"+flag) {
				ch.fields = append(ch.fields, "--"+flag)
			}
			d.Set(s)
		}
	}
	epochs, maxFailures := cctx.Int("epochs"), cctx.Float64("max-failures")
	apply("taskset", &cfg.Taskset, &given.Taskset)
	apply("tasks", &cfg.Tasks, &given.Tasks)
	apply("group-size", &cfg.RolloutsPerTask, &given.RolloutsPerTask)
	apply("max-concurrent", &cfg.MaxConcurrent, &given.MaxConcurrent)
	apply("seed", &cfg.Seed, &given.Seed)
	apply("shuffle", &cfg.Shuffle, &given.Shuffle)
	apply("model", &cfg.Model, &given.Model)
	apply("temperature", &cfg.Sampling.Temperature, &given.Sampling.Temperature)
	apply("top-p", &cfg.Sampling.TopP, &given.Sampling.TopP)
	apply("max-tokens", &cfg.Sampling.MaxTokens, &given.Sampling.MaxTokens)
	apply("harness", &cfg.Harness.Command, &given.Harness.Command)
	apply("harness", &cfg.Harness.Oracle, &given.Harness.Oracle)
	apply("harness-timeout", &cfg.Harness.Timeout, &given.Harness.Timeout)
	apply("harness-timeout", &cfg.Harness.TimeoutGiven, &given.Harness.TimeoutGiven)
	apply("verifier-timeout", &cfg.Harness.VerifierTimeout, &given.Harness.VerifierTimeout)
	apply("harness-dialect", &cfg.Harness.Dialect, &given.Harness.Dialect)
	apply("harness-env", &cfg.Harness.Env, &given.Harness.Env)
	apply("max-turns", &cfg.Harness.MaxTurns, &given.Harness.MaxTurns)
	apply("max-tokens-total", &cfg.Harness.MaxTokensTotal, &given.Harness.MaxTokensTotal)
	apply("max-model-time", &cfg.Harness.MaxModelTime, &given.Harness.MaxModelTime)
	apply("trace-tokens", &cfg.Harness.TraceTokens, &given.Harness.TraceTokens)
	apply("top-logprobs", &cfg.Harness.TopLogprobs, &given.Harness.TopLogprobs)
	apply("rubric", &cfg.Rubric, &given.Rubric)
	apply("max-attempts", &cfg.Limits.MaxAttempts, &given.Limits.MaxAttempts)
	apply("continue-as-new-after", &cfg.Limits.ContinueAsNewAfter, &given.Limits.ContinueAsNewAfter)
	apply("epochs", &train.Epochs, &epochs)
	apply("max-failures", &train.MaxFailures, &maxFailures)
	return ch, nil
}

// storeAccount tells what a run reused from what it ran by the run store's
// records before it started and after it ended. A workflow counts as ran
// every rollout its own execution finished, so a run resumed while still
// running (after Ctrl-C) would report its earlier rollouts as run again.
type storeAccount struct {
	store wiring.StoreConfig
	runID string
	// before is the store's records by key; nil when the store could not
	// be read, and then the workflow's own counts stand.
	before map[string]results.Record
}

// newStoreAccount reads what the store holds for a run now.
func newStoreAccount(ctx context.Context, sc wiring.StoreConfig, runID string) *storeAccount {
	a := &storeAccount{store: sc, runID: runID}
	if recs, ok := storedRecords(ctx, sc, runID); ok {
		a.before = make(map[string]results.Record, len(recs))
		for _, r := range recs {
			a.before[r.Key] = r
		}
	}
	return a
}

func storedRecords(ctx context.Context, sc wiring.StoreConfig, runID string) ([]results.Record, bool) {
	store, err := openStore(ctx, sc)
	if err != nil {
		return nil, false
	}
	defer store.Close()
	recs, err := store.List(ctx, runID)
	return recs, err == nil
}

// epochCount is what one epoch reused and ran.
type epochCount struct{ ran, reused int64 }

// counts compares the store now with before, per epoch: a record stored
// before and unchanged was reused, one added or replaced since (a failure
// run again) was run. ok is false when the store cannot tell: it could not
// be read, or holds nothing of the run (workers with another store).
func (a *storeAccount) counts(ctx context.Context) (map[int]epochCount, bool) {
	if a == nil || a.before == nil {
		return nil, false
	}
	after, ok := storedRecords(ctx, a.store, a.runID)
	if !ok || len(after) == 0 {
		return nil, false
	}
	counts := map[int]epochCount{}
	for _, r := range after {
		c := counts[r.Epoch]
		if b, held := a.before[r.Key]; held && b.Attempt == r.Attempt && b.Status == r.Status && b.FinishedAt.Equal(r.FinishedAt) {
			c.reused++
		} else {
			c.ran++
		}
		counts[r.Epoch] = c
	}
	return counts, true
}

// train sets a training run's ran and reused counts, per epoch and in
// total, to the store's where it can tell, and rewrites the run's summary
// with them so that `starter results` says the same.
func (a *storeAccount) train(ctx context.Context, r *workflows.TrainResult) {
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
	a.writeSummary(ctx, r)
}

// eval sets an evaluation's reused count to the store's, and rewrites the
// run's summary with it.
func (a *storeAccount) eval(ctx context.Context, r *workflows.Result) {
	counts, ok := a.counts(ctx)
	if !ok {
		return
	}
	r.Reused = 0
	for _, c := range counts {
		r.Reused += c.reused
	}
	a.writeSummary(ctx, r)
}

// writeSummary replaces the summary the workflow stored; failing that, the
// printed summary still has the store's counts.
func (a *storeAccount) writeSummary(ctx context.Context, v any) {
	if store, err := openStore(ctx, a.store); err == nil {
		_ = store.WriteSummary(ctx, a.runID, v)
		_ = store.Close()
	}
}
