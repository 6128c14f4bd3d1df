// Package storetest is the contract suite every results.Store passes: one
// table of cases, run against the files store and the PostgreSQL store.
package storetest

import (
	"context"
	"fmt"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
)

// Open returns a new, empty store for one case; the case closes it.
type Open func(t *testing.T) results.Store

// Files is a files run store at dir, or in a temp dir of tb's when dir is
// empty.
func Files(tb testing.TB, dir string) *results.Files {
	tb.Helper()
	if dir == "" {
		dir = tb.TempDir()
	}
	s, err := results.Open(dir)
	require.NoError(tb, err)
	return s
}

// Record is a success of rollout k of task index in epoch 0 of runID.
func Record(runID string, index int64, k int) results.Record {
	return results.Record{
		Key: rollout.Key(runID, 0, index, k), RunID: runID, Index: index, K: k,
		TaskID: fmt.Sprintf("task-%d", index), Reward: 1, Status: rollout.StatusOK, Turns: 2,
		Metrics:    map[string]float64{"tests": 1},
		FinishedAt: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC),
	}
}

// Failure is rec as a harness failure of attempt n.
func Failure(rec results.Record, n int) results.Record {
	rec.Status, rec.ErrorKind, rec.Error, rec.Reward, rec.Attempt = rollout.StatusError, rollout.KindHarnessExit, "exit 3", 0, n
	return rec
}

// Trace is a small trace of key whose exit code tells attempts apart.
func Trace(key string, exit int) *trace.Rollout {
	return &trace.Rollout{Key: key, TaskID: "task", Harness: trace.Harness{ExitCode: exit},
		Turns: []trace.Turn{{Index: 0, Status: 200}}}
}

// Run runs every case of the contract against stores from open.
func Run(t *testing.T, open Open) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { _ = s.Close() })
			c.run(t, context.Background(), s)
		})
	}
}

var cases = []struct {
	name string
	run  func(t *testing.T, ctx context.Context, s results.Store)
}{
	{"put is idempotent", func(t *testing.T, ctx context.Context, s results.Store) {
		rec := Record("run", 1, 0)
		rec.Attempt = 1
		first, existed, err := s.Put(ctx, rec, Trace(rec.Key, 0))
		require.NoError(t, err)
		assert.False(t, existed)
		assert.Equal(t, "traces/run~0~1~0/attempt-1.json", first.Trace)
		again, existed, err := s.Put(ctx, rec, Trace(rec.Key, 0))
		require.NoError(t, err)
		assert.True(t, existed, "a retry of a stored rollout writes nothing")
		assert.Equal(t, first, again)
		recs, err := s.List(ctx, "run")
		require.NoError(t, err)
		require.Len(t, recs, 1)
		assert.Equal(t, first, recs[0])
		got, ok, err := s.Get(ctx, "run", rec.Key)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, first, got)
		assert.Equal(t, map[string]float64{"tests": 1}, got.Metrics)
		tr, err := s.Trace(ctx, "run", rec.Key)
		require.NoError(t, err)
		assert.Equal(t, rec.Key, tr.Key)
		assert.Len(t, tr.Turns, 1)
		ats, err := s.Attempts(ctx, "run", rec.Key)
		require.NoError(t, err)
		assert.Len(t, ats, 1, "a success stands: the retry's trace is not stored")
	}},
	{"a success stands", func(t *testing.T, ctx context.Context, s results.Store) {
		ok := Record("run", 1, 0)
		ok.Attempt = 1
		_, _, err := s.Put(ctx, ok, Trace(ok.Key, 0))
		require.NoError(t, err)
		got, existed, err := s.Put(ctx, Failure(ok, 2), Trace(ok.Key, 3))
		require.NoError(t, err)
		assert.True(t, existed)
		assert.Equal(t, rollout.StatusOK, got.Status)
		other := ok
		other.Reward, other.Attempt = 0.25, 3
		got, existed, err = s.Put(ctx, other, Trace(ok.Key, 0))
		require.NoError(t, err)
		assert.True(t, existed)
		assert.Equal(t, 1.0, got.Reward, "a later success does not replace a stored one")
		stored, _, err := s.Get(ctx, "run", ok.Key)
		require.NoError(t, err)
		assert.Equal(t, 1, stored.Attempt)
	}},
	{"a failure gives way to a later attempt", func(t *testing.T, ctx context.Context, s results.Store) {
		rec := Record("run", 1, 0)
		_, _, err := s.Put(ctx, Failure(rec, 1), Trace(rec.Key, 3))
		require.NoError(t, err)
		// A replay of the same attempt's failure does not replace it.
		got, existed, err := s.Put(ctx, Failure(rec, 1), nil)
		require.NoError(t, err)
		assert.True(t, existed)
		assert.Equal(t, "traces/run~0~1~0/attempt-1.json", got.Trace)
		// A later attempt's failure does.
		got, existed, err = s.Put(ctx, Failure(rec, 3), Trace(rec.Key, 5))
		require.NoError(t, err)
		assert.False(t, existed)
		assert.Equal(t, 3, got.Attempt)
		// And a success replaces a failure, whatever its attempt number.
		rec.Attempt = 1
		got, existed, err = s.Put(ctx, rec, Trace(rec.Key, 0))
		require.NoError(t, err)
		assert.False(t, existed)
		assert.Equal(t, rollout.StatusOK, got.Status)
		assert.Equal(t, 4, got.Attempt, "a resumed run's attempt 1 is numbered past those stored")
		assert.Equal(t, "traces/run~0~1~0/attempt-4.json", got.Trace)
		recs, err := s.List(ctx, "run")
		require.NoError(t, err)
		require.Len(t, recs, 1, "one record per key")
		assert.Equal(t, rollout.StatusOK, recs[0].Status)
		tr, err := s.Trace(ctx, "run", rec.Key)
		require.NoError(t, err)
		assert.Equal(t, 0, tr.Harness.ExitCode, "the trace of the record's attempt")
	}},
	{"attempts are kept and numbered", func(t *testing.T, ctx context.Context, s results.Store) {
		key := rollout.Key("run", 0, 1, 0)
		infra, err := s.PutAttempt(ctx, "run", results.Attempt{N: 1, Error: "tunnel lost", Rollout: *Trace(key, 0)})
		require.NoError(t, err)
		assert.Equal(t, 1, infra.N)
		assert.Equal(t, "traces/run~0~1~0/attempt-1.json", infra.File)
		_, ok, err := s.Get(ctx, "run", key)
		require.NoError(t, err)
		assert.False(t, ok, "an attempt without a result adds no record")
		again, err := s.PutAttempt(ctx, "run", results.Attempt{N: 1, Error: "tunnel lost again", Rollout: *Trace(key, 0)})
		require.NoError(t, err)
		assert.Equal(t, 2, again.N, "a taken number moves past the last stored")
		rec := Record("run", 1, 0)
		rec.Attempt = 2
		got, _, err := s.Put(ctx, rec, Trace(key, 7))
		require.NoError(t, err)
		assert.Equal(t, 3, got.Attempt)
		ats, err := s.Attempts(ctx, "run", key)
		require.NoError(t, err)
		require.Len(t, ats, 3)
		for i, at := range ats {
			assert.Equal(t, i+1, at.N)
			assert.Equal(t, results.AttemptName(key, i+1), at.File)
			assert.Equal(t, key, at.Key)
		}
		assert.Equal(t, "tunnel lost", ats[0].Error)
		assert.Equal(t, "tunnel lost again", ats[1].Error)
		assert.Empty(t, ats[2].Error)
		assert.Equal(t, 7, ats[2].Harness.ExitCode)
		none, err := s.Attempts(ctx, "run", rollout.Key("run", 0, 2, 0))
		require.NoError(t, err)
		assert.Empty(t, none)
	}},
	{"a record without an attempt number", func(t *testing.T, ctx context.Context, s results.Store) {
		rec := Record("run", 1, 0)
		got, _, err := s.Put(ctx, rec, Trace(rec.Key, 0))
		require.NoError(t, err)
		assert.Equal(t, "traces/run~0~1~0.json", got.Trace)
		tr, err := s.Trace(ctx, "run", rec.Key)
		require.NoError(t, err)
		assert.Equal(t, rec.Key, tr.Key)
		noTrace := Record("run", 2, 0)
		got, _, err = s.Put(ctx, noTrace, nil)
		require.NoError(t, err)
		assert.Empty(t, got.Trace)
		_, err = s.Trace(ctx, "run", noTrace.Key)
		assert.ErrorIs(t, err, fs.ErrNotExist)
	}},
	{"concurrent writers of one key", func(t *testing.T, ctx context.Context, s results.Store) {
		rec := Record("run", 1, 0)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := Failure(rec, i+1)
				if i == 5 {
					r = rec
					r.Attempt = i + 1
				}
				_, _, err := s.Put(ctx, r, Trace(rec.Key, i))
				assert.NoError(t, err)
			}()
		}
		wg.Wait()
		recs, err := s.List(ctx, "run")
		require.NoError(t, err)
		require.Len(t, recs, 1)
		assert.Equal(t, rollout.StatusOK, recs[0].Status, "the success wins, whenever it came")
		ats, err := s.Attempts(ctx, "run", rec.Key)
		require.NoError(t, err)
		nums := map[int]bool{}
		for _, at := range ats {
			nums[at.N] = true
		}
		assert.Len(t, nums, len(ats), "no two attempts share a number")
		assert.GreaterOrEqual(t, len(ats), 1)
		tr, err := s.Trace(ctx, "run", rec.Key)
		require.NoError(t, err)
		assert.Equal(t, 5, tr.Harness.ExitCode, "the record names the success's trace")
	}},
	{"groups are written once", func(t *testing.T, ctx context.Context, s results.Store) {
		g := results.Group{Key: results.GroupKey("run", 1, 7), Epoch: 1, Index: 7, TaskID: "t",
			Rollouts: []string{"run/1/7/0", "run/1/7/1"}, Rewards: []float64{1, 0}, Mean: 0.5, Advantages: []float64{0.5, -0.5}}
		got, existed, err := s.PutGroup(ctx, "run", g)
		require.NoError(t, err)
		assert.False(t, existed)
		assert.Equal(t, g, got)
		g2 := g
		g2.Mean = 0.9
		stored, existed, err := s.PutGroup(ctx, "run", g2)
		require.NoError(t, err)
		assert.True(t, existed)
		assert.Equal(t, g, stored, "a group is written once")
		_, _, err = s.PutGroup(ctx, "run", results.Group{Key: "run/../x"})
		assert.Error(t, err)
	}},
	{"epochs", func(t *testing.T, ctx context.Context, s results.Store) {
		done, err := s.Epochs(ctx, "run")
		require.NoError(t, err)
		assert.Empty(t, done)
		require.NoError(t, s.WriteEpoch(ctx, "run", 10, map[string]int{"rollouts": 4}))
		require.NoError(t, s.WriteEpoch(ctx, "run", 2, map[string]int{"rollouts": 3}))
		require.NoError(t, s.WriteEpoch(ctx, "run", 2, map[string]int{"rollouts": 5}))
		done, err = s.Epochs(ctx, "run")
		require.NoError(t, err)
		assert.Equal(t, []int{2, 10}, done, "numeric order")
		var got map[string]int
		require.NoError(t, s.ReadEpoch(ctx, "run", 2, &got))
		assert.Equal(t, 5, got["rollouts"], "a rewritten epoch replaces the earlier one")
		assert.ErrorIs(t, s.ReadEpoch(ctx, "run", 3, &got), fs.ErrNotExist)
	}},
	{"summaries", func(t *testing.T, ctx context.Context, s results.Store) {
		var got map[string]any
		assert.ErrorIs(t, s.ReadSummary(ctx, "run", &got), fs.ErrNotExist)
		require.NoError(t, s.WriteSummary(ctx, "run", map[string]any{"rollouts": 1, "mean": 0.5}))
		require.NoError(t, s.WriteSummary(ctx, "run", map[string]any{"rollouts": 2, "mean": 0.75}))
		require.NoError(t, s.ReadSummary(ctx, "run", &got))
		assert.Equal(t, map[string]any{"rollouts": 2.0, "mean": 0.75}, got)
	}},
	{"listing runs and rollouts", func(t *testing.T, ctx context.Context, s results.Store) {
		ids, err := s.Runs(ctx)
		require.NoError(t, err)
		assert.Empty(t, ids)
		st, err := s.Stat(ctx, "b-run")
		require.NoError(t, err)
		assert.False(t, st.Exists)
		for _, i := range []int64{3, 1, 2} {
			_, _, err := s.Put(ctx, Record("b-run", i, 0), nil)
			require.NoError(t, err)
		}
		// A failure replaced by a success keeps its place.
		_, _, err = s.Put(ctx, Failure(Record("b-run", 0, 0), 1), nil)
		require.NoError(t, err)
		_, _, err = s.Put(ctx, Record("b-run", 4, 0), nil)
		require.NoError(t, err)
		ok := Record("b-run", 0, 0)
		ok.Attempt = 2
		_, _, err = s.Put(ctx, ok, nil)
		require.NoError(t, err)
		require.NoError(t, s.WriteSummary(ctx, "a-run", map[string]int{"n": 0}))
		require.NoError(t, s.WriteEpoch(ctx, "c-run", 0, map[string]int{"n": 0}))
		ids, err = s.Runs(ctx)
		require.NoError(t, err)
		assert.Equal(t, []string{"a-run", "b-run", "c-run"}, ids)
		recs, err := s.List(ctx, "b-run")
		require.NoError(t, err)
		var keys []string
		for _, r := range recs {
			keys = append(keys, r.Key)
		}
		assert.Equal(t, []string{"b-run/0/3/0", "b-run/0/1/0", "b-run/0/2/0", "b-run/0/0/0", "b-run/0/4/0"}, keys)
		assert.Equal(t, rollout.StatusOK, recs[3].Status)
		none, err := s.List(ctx, "unknown")
		require.NoError(t, err)
		assert.Empty(t, none)
		st, err = s.Stat(ctx, "b-run")
		require.NoError(t, err)
		assert.True(t, st.Exists)
		assert.False(t, st.Modified.IsZero())
		assert.WithinDuration(t, time.Now(), st.Modified, time.Hour)
		assert.Contains(t, s.Where("b-run"), "b-run")
	}},
	{"invalid names are refused", func(t *testing.T, ctx context.Context, s results.Store) {
		bad := Record("run", 1, 0)
		bad.Key = "run/../../etc"
		_, _, err := s.Put(ctx, bad, nil)
		assert.Error(t, err)
		bad = Record("run", 1, 0)
		bad.RunID = "../x"
		_, _, err = s.Put(ctx, bad, nil)
		assert.Error(t, err)
		_, err = s.List(ctx, "a/b")
		assert.Error(t, err)
		assert.Error(t, s.WriteSummary(ctx, "..", 1))
	}},
	{"a canceled context", func(t *testing.T, ctx context.Context, s results.Store) {
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		_, _, err := s.Put(ctx, Record("run", 1, 0), nil)
		assert.ErrorIs(t, err, context.Canceled)
		_, err = s.List(ctx, "run")
		assert.ErrorIs(t, err, context.Canceled)
	}},
}
