package results

import (
	"context"
	"encoding/json"
	"time"

	"github.com/evalflow/evalflow/trace"
)

// Store is the run store contract: what the activities write and what
// everything that reads runs (the starter's results, status, resume and
// export, the pull client, the run viewer) reads. Files keeps runs in a
// directory; results/postgres keeps them in a PostgreSQL database that
// workers on many hosts share. Both pass the same contract suite
// (results/storetest).
//
// Names a store hands out (Record.Trace, Attempt.File) identify a trace in
// the store, relative to its run; they are never host paths to open.
type Store interface {
	// Put stores a rollout's record and the trace of the attempt that made
	// it, idempotently on rec.Key: a stored success stands (Put returns it
	// and true); a stored failure gives way to a record of a later attempt
	// or a success, and a failed rerun's trace is kept even when the stored
	// failure stands. Attempts are numbered by rec.Attempt, or one past the
	// last stored when that number is taken (a resumed run numbers from 1
	// again). Put returns the record as stored, with Trace and FinishedAt
	// (if zero) set.
	Put(ctx context.Context, rec Record, tr *trace.Rollout) (Record, bool, error)
	// PutAttempt stores the trace of an attempt that ended without a record
	// (an infrastructure failure the workflow retries), numbered as Put
	// numbers attempts, and returns it with N and File set.
	PutAttempt(ctx context.Context, runID string, at Attempt) (Attempt, error)
	// Get returns the stored record of key in a run, and whether there is one.
	Get(ctx context.Context, runID, key string) (Record, bool, error)
	// List returns a run's records in the order they were first stored. An
	// unknown run has none.
	List(ctx context.Context, runID string) ([]Record, error)
	// Trace reads the trace of the attempt that made a rollout's record. A
	// missing trace is an error wrapping fs.ErrNotExist.
	Trace(ctx context.Context, runID, key string) (*trace.Rollout, error)
	// Attempts returns every stored attempt of a rollout, oldest first.
	Attempts(ctx context.Context, runID, key string) ([]Attempt, error)
	// PutGroup stores a group record unless one with its key is stored, in
	// which case the stored one is returned with true.
	PutGroup(ctx context.Context, runID string, g Group) (Group, bool, error)
	// WriteEpoch records a finished epoch's result (replacing an earlier
	// one); its presence tells a resumed run that the epoch is complete.
	WriteEpoch(ctx context.Context, runID string, epoch int, v any) error
	// ReadEpoch decodes a finished epoch's result into v. A missing epoch is
	// an error wrapping fs.ErrNotExist.
	ReadEpoch(ctx context.Context, runID string, epoch int, v any) error
	// Epochs lists the epochs of a run recorded as finished, in order.
	Epochs(ctx context.Context, runID string) ([]int, error)
	// WriteSummary stores v as the run's summary, replacing any previous one.
	WriteSummary(ctx context.Context, runID string, v any) error
	// ReadSummary decodes the run's summary into v. A run without one is an
	// error wrapping fs.ErrNotExist.
	ReadSummary(ctx context.Context, runID string, v any) error
	// Runs lists the ids of the runs in the store, sorted.
	Runs(ctx context.Context) ([]string, error)
	// Stat says whether the store knows a run and when its records last
	// changed (zero when it has none).
	Stat(ctx context.Context, runID string) (RunStat, error)
	// Where tells a person where a run is kept: a directory, or the
	// database (never with its password).
	Where(runID string) string
	// Close releases the store's resources.
	Close() error
}

// RunStat is what Store.Stat says of a run.
type RunStat struct {
	// Exists is true when the store holds anything of the run.
	Exists bool
	// Modified is when a record of the run was last stored.
	Modified time.Time
}

var _ Store = (*Files)(nil)

// Supersedes reports whether rec, a new record of a rollout, replaces
// stored, the record already kept: never a success; a failure only for a
// success or a later attempt (a resumed run reruns failed rollouts), not a
// replay of the same attempt. Every Store applies this rule.
func Supersedes(stored, rec Record) bool {
	return !final(stored, rec)
}

// ValidateKey reports whether key can name a rollout in the store.
func ValidateKey(key string) error { return checkKey(key) }

// AttemptName is the name of attempt n of key's trace, relative to its
// run: traces/<key with ~ for />/attempt-<n>.json, or for n = 0 (a record
// with no attempt number) traces/<key with ~ for />.json. Every Store names
// traces so.
func AttemptName(key string, n int) string {
	if n == 0 {
		return traceName(key)
	}
	return attemptName(key, n)
}

// TraceJSON reads traces from a Store as JSON: what a trainer's pull client
// takes (pull.WithTraces), which links no store of its own.
type TraceJSON struct{ Store Store }

// TraceJSON returns the trace of the attempt that made key's record.
func (t TraceJSON) TraceJSON(ctx context.Context, runID, key string) (json.RawMessage, error) {
	tr, err := t.Store.Trace(ctx, runID, key)
	if err != nil {
		return nil, err
	}
	return json.Marshal(tr)
}
