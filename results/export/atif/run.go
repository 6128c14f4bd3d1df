package atif

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/evalflow/evalflow/results"
)

// Each calls yield with the trajectory of each of a run's rollouts, in the
// order they were stored, and stops at the first error. A rollout without
// a trace, or whose trace holds no model call, has no trajectory (ATIF
// wants a step at least): skipped counts those.
func Each(ctx context.Context, store results.Store, runID string, agent Agent, yield func(Trajectory) error) (skipped int, err error) {
	recs, err := store.List(ctx, runID)
	if err != nil {
		return 0, err
	}
	for _, rec := range recs {
		if rec.Trace == "" {
			skipped++
			continue
		}
		tr, err := store.Trace(ctx, rec.RunID, rec.Key)
		if errors.Is(err, fs.ErrNotExist) {
			skipped++
			continue
		}
		if err != nil {
			return skipped, fmt.Errorf("trajectory of %s: %w", rec.Key, err)
		}
		t := FromRollout(rec, tr, agent)
		if len(t.Steps) == 0 {
			skipped++
			continue
		}
		if err := yield(t); err != nil {
			return skipped, err
		}
	}
	return skipped, nil
}

// FileName is where a rollout's trajectory goes in an export directory:
// <key>/trajectory.json, the key's slashes as ~ (as the run store names
// its trace files), so that a rollout is one directory.
func FileName(key string) string {
	return filepath.Join(strings.ReplaceAll(key, "/", "~"), "trajectory.json")
}

// WriteFile writes t, indented, to dir/FileName(t.SessionID).
func WriteFile(dir string, t Trajectory) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(t); err != nil {
		return fmt.Errorf("trajectory of %s: %w", t.SessionID, err)
	}
	path := filepath.Join(dir, FileName(t.SessionID))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
