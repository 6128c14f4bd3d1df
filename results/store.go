// Package results is the run store: the Store contract every reader and
// writer of runs uses, and Files, its implementation on a filesystem (one
// directory per run holding the rollout records (rollouts.jsonl), the trace
// of every attempt of every rollout (traces/) and the run summary). The
// PostgreSQL implementation, for workers that share no filesystem, is
// results/postgres.
// Writes are idempotent on the rollout key, so retries and resumes never
// duplicate or lose a rollout, even with several worker processes on one host.
package results

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
)

// Files is the run store rooted at a directory (runs/<run-id>/...). It is
// safe for concurrent use by many goroutines and by several processes on one
// host (an flock per run excludes writers); workers on several hosts need a
// filesystem whose flock holds across them, or results/postgres.
type Files struct {
	root string

	mu   sync.Mutex
	runs map[string]*lockedRun
}

type lockedRun struct {
	mu sync.Mutex
	*run
}

// Open opens the store rooted at root, creating the directory if absent.
func Open(root string) (*Files, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("open run store: %w", err)
	}
	return &Files{root: root, runs: map[string]*lockedRun{}}, nil
}

// Dir is the directory of a run.
func (s *Files) Dir(runID string) string {
	return filepath.Join(s.root, runID)
}

func (s *Files) run(runID string) *lockedRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[runID]
	if !ok {
		r = &lockedRun{run: newRun(s.Dir(runID))}
		s.runs[runID] = r
	}
	return r
}

// Put stores a rollout's record and the trace of the attempt that made it,
// unless a record with rec.Key is already stored, in which case it returns
// the stored record and true. A stored success is final: nothing more is
// written for its key. A stored failure gives way to a record of a later
// attempt or a success (resumed runs rerun failed rollouts), and the trace
// of a failed rerun is kept even when the stored failure stands.
//
// The trace (when tr is not nil) goes to its attempt's own file,
// traces/<key with ~ for />/attempt-<rec.Attempt>.json; a resumed run's
// attempt whose number is already taken gets the next free one, and the
// record keeps that number. A record with no attempt number (0) writes the
// single file traces/<key with ~ for />.json, as older runs did. Put returns
// the record as stored, with Trace (and FinishedAt, if zero) filled in.
func (s *Files) Put(ctx context.Context, rec Record, tr *trace.Rollout) (Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, false, err
	}
	if err := checkRunID(rec.RunID); err != nil {
		return Record{}, false, err
	}
	if err := checkKey(rec.Key); err != nil {
		return Record{}, false, err
	}
	r := s.run(rec.RunID)
	r.mu.Lock()
	defer r.mu.Unlock()
	// A success once indexed stays stored: no need to touch the disk.
	if stored, ok := r.get(rec.Key); ok && stored.Status != rollout.StatusError {
		return stored, true, nil
	}

	if err := os.MkdirAll(filepath.Join(r.dir, "traces"), 0o755); err != nil {
		return Record{}, false, fmt.Errorf("create run dir: %w", err)
	}
	unlock, err := lockFile(r.dir, syscall.LOCK_EX)
	if err != nil {
		return Record{}, false, err
	}
	defer unlock()
	torn, err := r.refresh()
	if err != nil {
		return Record{}, false, err
	}
	stored, ok := r.get(rec.Key)
	if ok && stored.Status != rollout.StatusError {
		return stored, true, nil
	}

	rec.Trace = ""
	if tr != nil {
		at, err := r.writeAttempt(rec.Key, Attempt{N: rec.Attempt, Rollout: *tr})
		if err != nil {
			return Record{}, false, err
		}
		rec.Attempt, rec.Trace = at.N, at.File
	}
	if ok && final(stored, rec) {
		return stored, true, nil
	}
	if rec.FinishedAt.IsZero() {
		rec.FinishedAt = time.Now().UTC()
	}
	if err := r.appendRecord(rec, torn); err != nil {
		return Record{}, false, fmt.Errorf("append record %s: %w", rec.Key, err)
	}
	return rec, false, nil
}

// final reports whether stored stands against a new record of its key: a
// success always does; a failure gives way to a later attempt (a resumed
// run reruns failed rollouts), but not to a replay of the same attempt.
func final(stored, rec Record) bool {
	return stored.Status != rollout.StatusError || rec.Attempt <= stored.Attempt && rec.Status == rollout.StatusError
}

// appendRecord writes rec as one line at the end of the log and syncs it. A torn
// tail left by a dead writer is cut first, so the line starts on a fresh line.
// It runs under the exclusive file lock, after refresh.
func (r *run) appendRecord(rec Record, torn int64) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	f, err := os.OpenFile(r.path(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if torn > 0 {
		if err := f.Truncate(r.offset); err != nil {
			return err
		}
	}
	if _, err := f.Write(line); err != nil {
		_ = f.Truncate(r.offset) // leave no torn line of our own
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if r.offset == 0 {
		if err := syncDir(r.dir); err != nil {
			return err
		}
	}
	r.add(rec, int64(len(line)))
	return nil
}

// Get returns the stored record of key in a run, and whether there is one.
func (s *Files) Get(ctx context.Context, runID, key string) (Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, false, err
	}
	if err := checkRunID(runID); err != nil {
		return Record{}, false, err
	}
	if err := checkKey(key); err != nil {
		return Record{}, false, err
	}
	r := s.run(runID)
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec, ok := r.get(key); ok {
		return rec, true, nil
	}
	if err := s.refreshShared(r); err != nil {
		return Record{}, false, err
	}
	rec, ok := r.get(key)
	return rec, ok, nil
}

// List returns a run's records in the order they were stored. An unknown run
// has none.
func (s *Files) List(ctx context.Context, runID string) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkRunID(runID); err != nil {
		return nil, err
	}
	r := s.run(runID)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := s.refreshShared(r); err != nil {
		return nil, err
	}
	return append([]Record(nil), r.recs...), nil
}

// refreshShared catches r up with the file under a shared lock. A run with no
// directory yet has nothing to read.
func (s *Files) refreshShared(r *lockedRun) error {
	if _, err := os.Stat(r.dir); os.IsNotExist(err) {
		return nil
	}
	unlock, err := lockFile(r.dir, syscall.LOCK_SH)
	if err != nil {
		return err
	}
	defer unlock()
	_, err = r.refresh()
	return err
}

// Trace reads the final trace of a rollout: the file its record names, or
// for a rollout stored without one, traces/<key>.json of older runs. Every
// attempt's trace is in Attempts. A missing trace is an error wrapping
// fs.ErrNotExist.
func (s *Files) Trace(ctx context.Context, runID, key string) (*trace.Rollout, error) {
	rec, ok, err := s.Get(ctx, runID, key)
	if err != nil {
		return nil, err
	}
	name := traceName(key)
	if ok && rec.Trace != "" {
		if !isTraceOf(key, rec.Trace) {
			return nil, fmt.Errorf("read trace %s: the record names %q, not a trace of its key", key, rec.Trace)
		}
		name = rec.Trace
	}
	var tr trace.Rollout
	if err := readJSON(filepath.Join(s.Dir(runID), name), &tr); err != nil {
		return nil, fmt.Errorf("read trace %s: %w", key, err)
	}
	return &tr, nil
}

// WriteSummary writes v as the run's summary.json, indented, replacing any
// previous summary atomically.
func (s *Files) WriteSummary(ctx context.Context, runID string, v any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkRunID(runID); err != nil {
		return err
	}
	dir := s.Dir(runID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create run dir: %w", err)
	}
	if err := writeJSON(filepath.Join(dir, summaryFile), v, true); err != nil {
		return fmt.Errorf("write summary of %s: %w", runID, err)
	}
	return nil
}

// ReadSummary decodes the run's summary.json into v. A run without a summary
// is an error wrapping fs.ErrNotExist.
func (s *Files) ReadSummary(ctx context.Context, runID string, v any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkRunID(runID); err != nil {
		return err
	}
	if err := readJSON(filepath.Join(s.Dir(runID), summaryFile), v); err != nil {
		return fmt.Errorf("read summary of %s: %w", runID, err)
	}
	return nil
}

// summaryFile is the run's summary, written by WriteSummary.
const summaryFile = "summary.json"

func writeJSON(path string, v any, indent bool) error {
	var (
		b   []byte
		err error
	)
	if indent {
		b, err = json.MarshalIndent(v, "", "  ")
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(b, '\n'))
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Runs lists the ids of the runs in the store, sorted: every directory
// under the root that is a valid run id and holds a record log, a summary
// or a finished epoch.
func (s *Files) Runs(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(s.root)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if !e.IsDir() || checkRunID(e.Name()) != nil {
			continue
		}
		for _, name := range []string{rolloutsFile, summaryFile, "epochs"} {
			if _, err := os.Stat(filepath.Join(s.root, e.Name(), name)); err == nil {
				ids = append(ids, e.Name())
				break
			}
		}
	}
	return ids, nil
}

// Stat says whether the run has a directory and when its record log last
// changed.
func (s *Files) Stat(ctx context.Context, runID string) (RunStat, error) {
	if err := ctx.Err(); err != nil {
		return RunStat{}, err
	}
	if err := checkRunID(runID); err != nil {
		return RunStat{}, err
	}
	var st RunStat
	if _, err := os.Stat(s.Dir(runID)); err == nil {
		st.Exists = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return RunStat{}, fmt.Errorf("stat run %s: %w", runID, err)
	}
	if fi, err := os.Stat(filepath.Join(s.Dir(runID), rolloutsFile)); err == nil {
		st.Modified = fi.ModTime().UTC()
	}
	return st, nil
}

// Where is the run's directory.
func (s *Files) Where(runID string) string { return s.Dir(runID) }

// Close does nothing: a Files store holds no resources between calls.
func (s *Files) Close() error { return nil }
