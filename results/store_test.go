package results

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
)

func record(runID string, index int64, k int) Record {
	return Record{
		Key:        rollout.Key(runID, 0, index, k),
		RunID:      runID,
		Index:      index,
		K:          k,
		TaskID:     fmt.Sprintf("task-%d", index),
		Reward:     float64(index),
		Status:     rollout.StatusOK,
		Turns:      2,
		FinishedAt: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC),
	}
}

// fileLines returns the lines of a run's rollouts.jsonl, each checked to be a
// whole JSON record.
func fileLines(t *testing.T, s *Files, runID string) []Record {
	t.Helper()
	f, err := os.Open(filepath.Join(s.Dir(runID), rolloutsFile))
	require.NoError(t, err)
	defer f.Close()
	var recs []Record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec Record
		require.NoError(t, json.Unmarshal(sc.Bytes(), &rec), "line %q", sc.Text())
		recs = append(recs, rec)
	}
	require.NoError(t, sc.Err())
	return recs
}

func keys(recs []Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Key
	}
	return out
}

func TestPutGetTrace(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "runs"))
	require.NoError(t, err)
	rec := record("run1", 3, 1)
	tr := &trace.Rollout{Key: rec.Key, TaskID: rec.TaskID, Reward: 1, Turns: []trace.Turn{{Index: 0, Dialect: "chat", Status: 200}}}

	got, existed, err := s.Put(ctx, rec, tr)
	require.NoError(t, err)
	assert.False(t, existed)
	assert.Equal(t, "traces/run1~0~3~1.json", got.Trace)
	assert.FileExists(t, filepath.Join(s.Dir("run1"), got.Trace))

	stored, ok, err := s.Get(ctx, "run1", rec.Key)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, got, stored)

	_, ok, err = s.Get(ctx, "run1", rollout.Key("run1", 0, 4, 0))
	require.NoError(t, err)
	assert.False(t, ok, "Get(unknown key) found a record")

	gotTrace, err := s.Trace(ctx, "run1", rec.Key)
	require.NoError(t, err)
	assert.Equal(t, tr, gotTrace)

	_, err = s.Trace(ctx, "run1", rollout.Key("run1", 0, 4, 0))
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

func TestPutIdempotent(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	first := record("run1", 0, 0)
	_, existed, err := s.Put(ctx, first, &trace.Rollout{Reward: 1})
	require.NoError(t, err)
	require.False(t, existed)

	second := first
	second.Reward = 99
	got, existed, err := s.Put(ctx, second, &trace.Rollout{Reward: 99})
	require.NoError(t, err)
	assert.True(t, existed)
	assert.Equal(t, first.Reward, got.Reward, "Put(existing key) returned the new record")

	tr, err := s.Trace(ctx, "run1", first.Key)
	require.NoError(t, err)
	assert.Equal(t, 1.0, tr.Reward, "Put(existing key) rewrote the trace")
	assert.Len(t, fileLines(t, s, "run1"), 1)
}

func TestPutConcurrentSameKey(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir())
	require.NoError(t, err)

	const n = 50
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		fresh    int
		attempts = map[int]bool{}
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := record("run1", 7, 0)
			rec.Attempt = i
			got, existed, err := s.Put(ctx, rec, &trace.Rollout{})
			assert.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			if !existed {
				fresh++
			}
			attempts[got.Attempt] = true
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, fresh, "Puts that reported writing")
	assert.Len(t, attempts, 1, "Puts disagree on the stored record")
	assert.Len(t, fileLines(t, s, "run1"), 1)
}

func TestPutTwoStores(t *testing.T) {
	// Two Stores on one root stand for two worker processes: only the file
	// lock keeps them from both appending a key.
	ctx := context.Background()
	root := t.TempDir()
	a, err := Open(root)
	require.NoError(t, err)
	b, err := Open(root)
	require.NoError(t, err)

	const keysN = 20
	var wg sync.WaitGroup
	for _, s := range []*Files{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range keysN {
				_, _, err := s.Put(ctx, record("run1", int64(i), 0), &trace.Rollout{})
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()

	lines := fileLines(t, a, "run1")
	assert.Len(t, lines, keysN)
	seen := map[string]int{}
	for _, r := range lines {
		seen[r.Key]++
	}
	for i := range keysN {
		assert.Equal(t, 1, seen[rollout.Key("run1", 0, int64(i), 0)], "lines for index %d", i)
	}
	// Each store sees the other's writes.
	for _, s := range []*Files{a, b} {
		got, err := s.List(ctx, "run1")
		require.NoError(t, err)
		assert.Equal(t, keys(lines), keys(got))
	}
}

func TestListOrder(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	var want []string
	for _, i := range []int64{5, 1, 9, 0, 3} {
		rec := record("run1", i, 0)
		_, _, err := s.Put(ctx, rec, nil)
		require.NoError(t, err)
		want = append(want, rec.Key)
	}
	got, err := s.List(ctx, "run1")
	require.NoError(t, err)
	assert.Equal(t, want, keys(got))

	// A fresh store reads the same order from disk.
	other, err := Open(filepath.Dir(s.Dir("run1")))
	require.NoError(t, err)
	got, err = other.List(ctx, "run1")
	require.NoError(t, err)
	assert.Equal(t, want, keys(got))

	none, err := s.List(ctx, "no-such-run")
	require.NoError(t, err)
	assert.Empty(t, none)
}

func TestTornTail(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := Open(root)
	require.NoError(t, err)
	for i := range 2 {
		_, _, err := s.Put(ctx, record("run1", int64(i), 0), nil)
		require.NoError(t, err)
	}
	// A writer died mid-append.
	f, err := os.OpenFile(filepath.Join(s.Dir("run1"), rolloutsFile), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"key":"run1/0/2/0","run_id":"ru`)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	after, err := Open(root)
	require.NoError(t, err)
	got, err := after.List(ctx, "run1")
	require.NoError(t, err)
	assert.Equal(t, []string{"run1/0/0/0", "run1/0/1/0"}, keys(got))

	// The torn key can be written again, and the file stays well formed.
	_, existed, err := after.Put(ctx, record("run1", 2, 0), nil)
	require.NoError(t, err)
	assert.False(t, existed)
	assert.Equal(t, []string{"run1/0/0/0", "run1/0/1/0", "run1/0/2/0"}, keys(fileLines(t, after, "run1")))

	// The first store catches up from where it was.
	got, err = s.List(ctx, "run1")
	require.NoError(t, err)
	assert.Equal(t, []string{"run1/0/0/0", "run1/0/1/0", "run1/0/2/0"}, keys(got))
}

func TestCorruptMiddleLine(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := Open(root)
	require.NoError(t, err)
	for i := range 3 {
		_, _, err := s.Put(ctx, record("run1", int64(i), 0), nil)
		require.NoError(t, err)
	}
	path := filepath.Join(s.Dir("run1"), rolloutsFile)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.SplitAfter(string(data), "\n")
	lines[1] = strings.Repeat("#", len(lines[1])-1) + "\n"
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644))

	// The store that already read those bytes does not read them again.
	got, err := s.List(ctx, "run1")
	require.NoError(t, err)
	assert.Len(t, got, 3)

	fresh, err := Open(root)
	require.NoError(t, err)
	_, err = fresh.List(ctx, "run1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 2")
	_, _, err = fresh.Put(ctx, record("run1", 9, 0), nil)
	assert.Error(t, err, "Put after a corrupt line")
}

func TestSummaryRoundTrip(t *testing.T) {
	type summary struct {
		Rollouts int                `json:"rollouts"`
		Mean     float64            `json:"mean_reward"`
		ByKind   map[string]int     `json:"by_kind"`
		Started  time.Time          `json:"started"`
		Extra    map[string]float64 `json:"extra,omitempty"`
	}
	ctx := context.Background()
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	want := summary{Rollouts: 4, Mean: 0.75, ByKind: map[string]int{"timeout": 1}, Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	require.NoError(t, s.WriteSummary(ctx, "run1", want))

	raw, err := os.ReadFile(filepath.Join(s.Dir("run1"), "summary.json"))
	require.NoError(t, err)
	assert.Contains(t, string(raw), "\n  \"rollouts\": 4", "summary is not indented")

	var got summary
	require.NoError(t, s.ReadSummary(ctx, "run1", &got))
	assert.Equal(t, want, got)

	want.Rollouts = 5
	require.NoError(t, s.WriteSummary(ctx, "run1", want))
	require.NoError(t, s.ReadSummary(ctx, "run1", &got))
	assert.Equal(t, 5, got.Rollouts)

	assert.ErrorIs(t, s.ReadSummary(ctx, "run2", &got), fs.ErrNotExist)
}

func TestPathEscapeRejected(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "runs")
	s, err := Open(root)
	require.NoError(t, err)
	tests := []struct {
		runID, key string
	}{
		{"..", "x/0/0/0"},
		{".", "x/0/0/0"},
		{"", "x/0/0/0"},
		{"a/b", "a/0/0/0"},
		{`a\b`, "x/0/0/0"},
		{"run1", "../../etc/0/0/0"},
		{"run1", "run1/../0/0"},
		{"run1", "run1//0/0"},
		{"run1", "/run1/0/0/0"},
		{"run1", "run1~0/0/0"},
		{"run1", "run1/0/0/0\x00"},
		{"run1", ""},
		{"run1", strings.Repeat("a", 300)},
	}
	for _, tt := range tests {
		rec := record("x", 0, 0)
		rec.RunID, rec.Key = tt.runID, tt.key
		_, _, err := s.Put(ctx, rec, &trace.Rollout{})
		assert.Error(t, err, "Put(run %q, key %q)", tt.runID, tt.key)
		_, _, err = s.Get(ctx, tt.runID, tt.key)
		assert.Error(t, err, "Get(run %q, key %q)", tt.runID, tt.key)
		_, err = s.Trace(ctx, tt.runID, tt.key)
		assert.Error(t, err, "Trace(run %q, key %q)", tt.runID, tt.key)
	}
	for _, runID := range []string{"..", "../x", "a/b"} {
		assert.Error(t, s.WriteSummary(ctx, runID, 1), "WriteSummary(%q)", runID)
		_, err := s.List(ctx, runID)
		assert.Error(t, err, "List(%q)", runID)
	}
	// Nothing was written outside the root.
	entries, err := os.ReadDir(filepath.Dir(root))
	require.NoError(t, err)
	assert.Len(t, entries, 1)
	entries, err = os.ReadDir(root)
	require.NoError(t, err)
	assert.Empty(t, entries)
}

func TestCanceledContext(t *testing.T) {
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = s.Put(ctx, record("run1", 0, 0), nil)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = s.List(context.Background(), "run1")
	assert.NoError(t, err)
}

func TestRecordMetrics(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "runs"))
	require.NoError(t, err)
	scored := record("run1", 1, 0)
	scored.Metrics = map[string]float64{"tests": 1, "tests.passed": 3, "judge": 0.7}
	plain := record("run1", 2, 0)
	for _, rec := range []Record{scored, plain} {
		_, _, err := s.Put(ctx, rec, &trace.Rollout{Key: rec.Key})
		require.NoError(t, err)
	}

	got, ok, err := s.Get(ctx, "run1", scored.Key)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, scored.Metrics, got.Metrics)

	raw, err := os.ReadFile(filepath.Join(s.Dir("run1"), rolloutsFile))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	require.Len(t, lines, 2)
	assert.Contains(t, lines[0], `"metrics":{"judge":0.7,"tests":1,"tests.passed":3}`)
	assert.NotContains(t, lines[1], `"metrics"`, "a record without metrics has no metrics key")
}
