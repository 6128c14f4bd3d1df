package results

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/evalflow/evalflow/trace"
)

// Attempt is one attempt of a rollout as the run store keeps it: the trace
// of what it did and, for an attempt the infrastructure cut short (a dead
// tunnel, a failing provider, a harness that could not start), why. Every
// attempt keeps its own file, traces/<key with ~ for />/attempt-<n>.json,
// which decodes as a trace.Rollout too.
type Attempt struct {
	// N numbers the attempt from 1. 0 is a trace stored with no attempt
	// number, as traces/<key>.json (the layout of older runs).
	N int `json:"attempt"`
	// Error is the infrastructure failure that ended the attempt, if any.
	Error string `json:"error,omitempty"`
	trace.Rollout
	// File is the attempt's trace file, relative to the run's directory.
	File string `json:"-"`
}

// PutAttempt stores the trace of an attempt of the rollout at.Key that ended
// without a record (an infrastructure failure the workflow retries) and
// returns it with N and File set. Attempts are numbered as Put numbers them.
func (s *Files) PutAttempt(ctx context.Context, runID string, at Attempt) (Attempt, error) {
	if err := ctx.Err(); err != nil {
		return Attempt{}, err
	}
	if err := checkRunID(runID); err != nil {
		return Attempt{}, err
	}
	if err := checkKey(at.Key); err != nil {
		return Attempt{}, err
	}
	r := s.run(runID)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := os.MkdirAll(filepath.Join(r.dir, "traces"), 0o755); err != nil {
		return Attempt{}, fmt.Errorf("create run dir: %w", err)
	}
	unlock, err := lockFile(r.dir, syscall.LOCK_EX)
	if err != nil {
		return Attempt{}, err
	}
	defer unlock()
	return r.writeAttempt(at.Key, at)
}

// writeAttempt numbers at, an attempt of key, and writes its file. It runs
// under the run's exclusive file lock, so two writers never pick one number.
func (r *run) writeAttempt(key string, at Attempt) (Attempt, error) {
	n, err := r.nextAttempt(key, at.N)
	if err != nil {
		return Attempt{}, err
	}
	at.N, at.File = n, attemptName(key, n)
	if n == 0 {
		at.File = traceName(key)
	} else if err := os.MkdirAll(filepath.Join(r.dir, attemptDir(key)), 0o755); err != nil {
		return Attempt{}, fmt.Errorf("create trace dir %s: %w", key, err)
	}
	if err := writeJSON(filepath.Join(r.dir, at.File), at, false); err != nil {
		return Attempt{}, fmt.Errorf("write trace %s: %w", key, err)
	}
	return at, nil
}

// nextAttempt is the number attempt n of key is stored under: n itself,
// unless the store already holds attempt n or a later one (a resumed run
// numbers its attempts from 1 again); then one past the last stored, so that
// no attempt's trace replaces another's and numbers follow time.
func (r *run) nextAttempt(key string, n int) (int, error) {
	last := -1 // nothing stored
	if _, err := os.Stat(filepath.Join(r.dir, traceName(key))); err == nil {
		last = 0
	} else if !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("stat trace %s: %w", key, err)
	}
	nums, err := r.attemptNumbers(key)
	if err != nil {
		return 0, err
	}
	if len(nums) > 0 {
		last = max(last, nums[len(nums)-1])
	}
	return max(n, last+1), nil
}

// attemptNumbers lists the numbered attempts stored for key, in order.
func (r *run) attemptNumbers(key string) ([]int, error) {
	entries, err := os.ReadDir(filepath.Join(r.dir, attemptDir(key)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list attempts of %s: %w", key, err)
	}
	var nums []int
	for _, e := range entries {
		if n, ok := attemptNumber(e.Name()); ok && e.Type().IsRegular() {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	return nums, nil
}

// Attempts returns every stored attempt of a rollout, oldest first: a trace
// of the older single-file layout (N 0) first, then the numbered attempts.
// The record's Trace names the last attempt that produced a record. A
// rollout with no stored attempt has none.
func (s *Files) Attempts(ctx context.Context, runID, key string) ([]Attempt, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkRunID(runID); err != nil {
		return nil, err
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	r := s.run(runID)
	var files []string
	if _, err := os.Stat(filepath.Join(r.dir, traceName(key))); err == nil {
		files = append(files, traceName(key))
	}
	nums, err := r.attemptNumbers(key)
	if err != nil {
		return nil, err
	}
	for _, n := range nums {
		files = append(files, attemptName(key, n))
	}
	out := make([]Attempt, 0, len(files))
	for _, f := range files {
		var at Attempt
		if err := readJSON(filepath.Join(r.dir, f), &at); err != nil {
			return nil, fmt.Errorf("read trace %s: %w", f, err)
		}
		at.File = f
		if n, ok := attemptNumber(filepath.Base(f)); ok {
			at.N = n // the file name rules, whatever the body says
		}
		out = append(out, at)
	}
	return out, nil
}
