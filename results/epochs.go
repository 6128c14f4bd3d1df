package results

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Group is the record of one task's group of rollouts in a training epoch:
// the rewards the trainer sees, with the group mean and advantages.
type Group struct {
	Key        string    `json:"key"` // run/epoch/index
	Epoch      int       `json:"epoch"`
	Index      int64     `json:"index"`
	TaskID     string    `json:"task_id"`
	Rollouts   []string  `json:"rollouts"` // rollout keys, by k
	Rewards    []float64 `json:"rewards"`
	Mean       float64   `json:"mean"`
	Std        float64   `json:"std"`
	Advantages []float64 `json:"advantages"`
}

// GroupKey formats run/epoch/index.
func GroupKey(runID string, epoch int, index int64) string {
	return fmt.Sprintf("%s/%d/%d", runID, epoch, index)
}

// PutGroup stores a group record unless one with its key is stored, in which
// case the stored one is returned with true.
func (s *Files) PutGroup(ctx context.Context, runID string, g Group) (Group, bool, error) {
	if err := ctx.Err(); err != nil {
		return Group{}, false, err
	}
	if err := checkRunID(runID); err != nil {
		return Group{}, false, err
	}
	if err := checkKey(g.Key); err != nil {
		return Group{}, false, err
	}
	path := filepath.Join(s.Dir(runID), "groups", strings.ReplaceAll(g.Key, "/", "~")+".json")
	var stored Group
	if err := readJSON(path, &stored); err == nil {
		return stored, true, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Group{}, false, fmt.Errorf("read group %s: %w", g.Key, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return Group{}, false, fmt.Errorf("create groups dir: %w", err)
	}
	if err := writeJSON(path, g, false); err != nil {
		return Group{}, false, fmt.Errorf("write group %s: %w", g.Key, err)
	}
	return g, false, nil
}

// WriteEpoch records a finished epoch's result; its presence is what tells a
// resumed run that the epoch is complete.
func (s *Files) WriteEpoch(ctx context.Context, runID string, epoch int, v any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkRunID(runID); err != nil {
		return err
	}
	dir := filepath.Join(s.Dir(runID), "epochs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create epochs dir: %w", err)
	}
	if err := writeJSON(filepath.Join(dir, fmt.Sprintf("epoch-%d.json", epoch)), v, true); err != nil {
		return fmt.Errorf("write epoch %d of %s: %w", epoch, runID, err)
	}
	return nil
}

// ReadEpoch decodes a finished epoch's result into v.
func (s *Files) ReadEpoch(ctx context.Context, runID string, epoch int, v any) error {
	if err := checkRunID(runID); err != nil {
		return err
	}
	return readJSON(filepath.Join(s.Dir(runID), "epochs", fmt.Sprintf("epoch-%d.json", epoch)), v)
}

// Epochs lists the epochs of a run recorded as finished, in order.
func (s *Files) Epochs(ctx context.Context, runID string) ([]int, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkRunID(runID); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(filepath.Join(s.Dir(runID), "epochs"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list epochs of %s: %w", runID, err)
	}
	var out []int
	for _, e := range entries {
		name, ok := strings.CutSuffix(strings.TrimPrefix(e.Name(), "epoch-"), ".json")
		if n, err := strconv.Atoi(name); ok && err == nil && strings.HasPrefix(e.Name(), "epoch-") {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out, nil
}
