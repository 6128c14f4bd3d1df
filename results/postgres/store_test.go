package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/logtest"
	"github.com/evalflow/evalflow/internal/results/postgres/pgtest"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/postgres"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/rollout"
)

func open(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, postgres.Options{})
	require.NoError(t, err)
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) results.Store { return open(t, pgtest.URL(t)) })
}

// Workers starting together on an empty database migrate it once.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	url := pgtest.URL(t)
	var wg sync.WaitGroup
	stores := make([]*postgres.Store, 4)
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := postgres.Open(context.Background(), url, postgres.Options{})
			if assert.NoError(t, err) {
				stores[i] = s
			}
		}()
	}
	wg.Wait()
	for _, s := range stores {
		if s != nil {
			defer s.Close()
		}
	}
	require.NotNil(t, stores[0])
	var versions []int
	rows, err := stores[0].Pool().Query(context.Background(), `SELECT version FROM evalflow_schema ORDER BY version`)
	require.NoError(t, err)
	versions, err = pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	assert.Equal(t, []int{1}, versions)
	assert.Equal(t, postgres.SchemaVersion, versions[len(versions)-1])
}

// A database migrated by a newer evalflow is refused with a clear error,
// not written to.
func TestRefusesANewerSchema(t *testing.T) {
	url := pgtest.URL(t)
	s := open(t, url)
	_, err := s.Pool().Exec(context.Background(), `INSERT INTO evalflow_schema (version) VALUES ($1)`, postgres.SchemaVersion+1)
	require.NoError(t, err)
	s.Close()
	_, err = postgres.Open(context.Background(), url, postgres.Options{})
	require.ErrorIs(t, err, postgres.ErrSchemaTooNew)
	assert.Contains(t, err.Error(), fmt.Sprintf("version %d", postgres.SchemaVersion+1))
	assert.Contains(t, err.Error(), "upgrade evalflow")
}

// Two workers (two pools, as two processes have) write one rollout key at
// once, each a failed attempt and one of them a success: one record, the
// success, and every attempt's trace under a number of its own.
func TestTwoWorkersWriteOneKey(t *testing.T) {
	url := pgtest.URL(t)
	a, b := open(t, url), open(t, url)
	defer a.Close()
	defer b.Close()
	ctx := context.Background()
	rec := storetest.Record("run", 1, 0)
	const each = 10
	var wg sync.WaitGroup
	for w, s := range []*postgres.Store{a, b} {
		for i := range each {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := storetest.Failure(rec, 1)
				if w == 1 && i == each-1 {
					r = rec // the last write of the second worker succeeds
					r.Attempt = 1
				}
				_, _, err := s.Put(ctx, r, storetest.Trace(rec.Key, w*100+i))
				assert.NoError(t, err)
			}()
		}
	}
	wg.Wait()
	recs, err := a.List(ctx, "run")
	require.NoError(t, err)
	require.Len(t, recs, 1, "one row per key")
	assert.Equal(t, rollout.StatusOK, recs[0].Status, "the success wins over every failure")
	ats, err := b.Attempts(ctx, "run", rec.Key)
	require.NoError(t, err)
	exits := map[int]bool{}
	for i, at := range ats {
		assert.Equal(t, i+1, at.N, "attempts numbered 1..n without a gap")
		exits[at.Harness.ExitCode] = true
	}
	// Every failure's trace is kept; the success's is too. Failures written
	// after the success stored nothing (a success stands).
	tr, err := a.Trace(ctx, "run", rec.Key)
	require.NoError(t, err)
	assert.Equal(t, 100+each-1, tr.Harness.ExitCode)
	assert.True(t, exits[100+each-1])
	var n int
	require.NoError(t, a.Pool().QueryRow(ctx, `SELECT count(*) FROM evalflow_rollouts`).Scan(&n))
	assert.Equal(t, 1, n)
}

// The database restarts while writers are busy: calls wait with backoff
// and go on once it is back; nothing is lost or stored twice.
func TestDatabaseRestartMidWrites(t *testing.T) {
	cluster := pgtest.StartCluster(t)
	var logs logtest.Buffer
	s, err := postgres.Open(context.Background(), cluster.URL, postgres.Options{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), MaxConns: 8})
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const writers, each = 8, 40
	var stored atomic.Int64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				rec := storetest.Record("run", int64(w*each+i), 0)
				rec.Attempt = 1
				_, _, err := s.Put(ctx, rec, storetest.Trace(rec.Key, 0))
				if !assert.NoError(t, err) {
					return
				}
				stored.Add(1)
			}
		}()
	}
	require.Eventually(t, func() bool { return stored.Load() >= writers*each/4 }, time.Minute, 5*time.Millisecond)
	cluster.Stop(t)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "run store unreachable") },
		time.Minute, 10*time.Millisecond, "a writer notices the database is gone")
	atStop := stored.Load()
	cluster.Start(t)
	wg.Wait()
	assert.Less(t, atStop, int64(writers*each), "writes were still to do when the database went")
	recs, err := s.List(ctx, "run")
	require.NoError(t, err)
	assert.Len(t, recs, writers*each, "every write landed once")
	keys := map[string]bool{}
	for _, r := range recs {
		keys[r.Key] = true
	}
	assert.Len(t, keys, writers*each)
	assert.Contains(t, logs.String(), "run store reachable again")
}

// The password is in no error and no log line, whatever fails.
func TestPasswordNeverShown(t *testing.T) {
	url, password := pgtest.URLWithOwnRole(t)
	var logs logtest.Buffer
	s, err := postgres.Open(context.Background(), url, postgres.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	defer s.Close()
	assert.NotContains(t, s.Where("run"), password)
	assert.Contains(t, s.Where("run"), "127.0.0.1")
	_, _, err = s.Put(context.Background(), storetest.Record("run", 1, 0), nil)
	require.NoError(t, err, "the role's own schema is writable")

	wrong := strings.Replace(url, password, password+"x", 1)
	_, err = postgres.Open(context.Background(), wrong, postgres.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), password)
	unreachable := regexp.MustCompile(`127\.0\.0\.1:\d+`).ReplaceAllString(url, devtest.FreeAddr(t))
	require.NotEqual(t, url, unreachable)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = postgres.Open(ctx, unreachable, postgres.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), password)
	assert.Contains(t, logs.String(), "run store unreachable", "the wait is logged")
	assert.NotContains(t, logs.String(), password)
}
