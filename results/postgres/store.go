// Package postgres is the run store in a PostgreSQL database, for workers
// that share no filesystem: every worker, the starter, the pull client and
// the run viewer reach the same runs through one URL. It implements
// results.Store with the rule of results.Files (a stored success stands, a
// stored failure gives way to a later attempt's record, every attempt's
// trace is kept), and creates and migrates its schema on Open.
//
// The URL (postgres://user:password@host:port/db) comes from the process's
// environment or flags only; the store never writes its password into an
// error, a log line or a run.
package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/klauspost/compress/zstd"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
)

// Options tune a Store; the zero value is ready to use.
type Options struct {
	// MaxConns bounds the pool's connections (default 16, or the URL's
	// pool_max_conns).
	MaxConns int32
	// RetryFor bounds how long a call keeps retrying while the database is
	// unreachable (default 5 minutes); the call's context bounds it too.
	RetryFor time.Duration
	// Logger receives a line when the database is unreachable and calls
	// wait for it (default slog.Default()).
	Logger *slog.Logger
}

// Store is the run store in PostgreSQL. It is safe for concurrent use by
// many goroutines and by many processes on many hosts.
type Store struct {
	pool   *pgxpool.Pool
	where  string // the URL without its password
	secret string // the password, redacted from every error
	opts   Options
	enc    *zstd.Encoder
	dec    *zstd.Decoder
}

var _ results.Store = (*Store)(nil)

// IsURL reports whether s names a PostgreSQL store (postgres:// or
// postgresql://).
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Open connects to the database at rawURL, creates or migrates evalflow's
// schema (refusing a schema newer than this build: ErrSchemaTooNew) and
// returns the store. Connecting waits for a database that is still starting
// as calls do (Options.RetryFor).
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	where, secret := redactURL(rawURL)
	if opts.RetryFor <= 0 {
		opts.RetryFor = 5 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("run store %s: %w", where, redactErr(err, secret))
	}
	if !strings.Contains(rawURL, "pool_max_conns") {
		cfg.MaxConns = 16
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	cfg.MaxConnIdleTime = time.Minute
	cfg.HealthCheckPeriod = 15 * time.Second
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	s := &Store{where: where, secret: secret, opts: opts}
	if s.enc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest)); err != nil {
		return nil, err
	}
	if s.dec, err = zstd.NewReader(nil); err != nil {
		return nil, err
	}
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("run store %s: %w", where, redactErr(err, secret))
	}
	if err := s.retry(ctx, "migrate the schema", func(ctx context.Context) error { return migrate(ctx, s.pool) }); err != nil {
		s.pool.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the pool.
func (s *Store) Close() error {
	s.pool.Close()
	s.dec.Close()
	return nil
}

// Where names the database (without its password) and the run.
func (s *Store) Where(runID string) string {
	return s.where + " (run " + runID + ")"
}

// Pool is the store's connection pool, for tools that inspect the tables.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// lockKey is the advisory lock of one rollout key: writers of one rollout
// take turns, so attempts are numbered without gaps or clashes.
func lockKey(runID, key string) int64 {
	h := fnv.New64a()
	h.Write([]byte(runID))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return int64(h.Sum64())
}

// Put stores a rollout's record and its attempt's trace with the rule of
// results.Store: in one transaction, under the rollout's advisory lock, the
// attempt gets its number and the record goes in with INSERT … ON CONFLICT,
// replacing a stored record only when results.Supersedes says so.
func (s *Store) Put(ctx context.Context, rec results.Record, tr *trace.Rollout) (results.Record, bool, error) {
	if err := check(rec.RunID, rec.Key); err != nil {
		return results.Record{}, false, err
	}
	var (
		out     results.Record
		existed bool
	)
	err := s.retry(ctx, "store "+rec.Key, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			out, existed = results.Record{}, false
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey(rec.RunID, rec.Key)); err != nil {
				return err
			}
			stored, ok, err := getRecord(ctx, tx, rec.RunID, rec.Key)
			if err != nil {
				return err
			}
			if ok && stored.Status != rollout.StatusError {
				out, existed = stored, true
				return nil
			}
			r := rec
			r.Trace = ""
			if tr != nil {
				at, err := s.insertAttempt(ctx, tx, r.RunID, results.Attempt{N: r.Attempt, Rollout: *tr})
				if err != nil {
					return err
				}
				r.Attempt, r.Trace = at.N, at.File
			}
			if ok && !results.Supersedes(stored, r) {
				out, existed = stored, true
				return nil
			}
			if r.FinishedAt.IsZero() {
				r.FinishedAt = time.Now().UTC()
			}
			body, err := json.Marshal(r)
			if err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, `
INSERT INTO evalflow_rollouts AS r (run_id, key, status, attempt, record)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (run_id, key) DO UPDATE
	SET status = EXCLUDED.status, attempt = EXCLUDED.attempt, record = EXCLUDED.record, stored_at = now()
	WHERE r.status = $6 AND (EXCLUDED.status <> $6 OR EXCLUDED.attempt > r.attempt)`,
				r.RunID, r.Key, r.Status, r.Attempt, body, rollout.StatusError)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				// A record that stands was stored meanwhile (only without the
				// lock, by an older writer): it wins.
				stored, _, err := getRecord(ctx, tx, rec.RunID, rec.Key)
				out, existed = stored, true
				return err
			}
			out = r
			return nil
		})
	})
	if err != nil {
		return results.Record{}, false, err
	}
	return out, existed, nil
}

// insertAttempt numbers at (past the last stored attempt when its number is
// taken) and stores its trace, compressed. It runs under the rollout's lock.
func (s *Store) insertAttempt(ctx context.Context, tx pgx.Tx, runID string, at results.Attempt) (results.Attempt, error) {
	var last int
	if err := tx.QueryRow(ctx, `SELECT COALESCE(max(n), -1) FROM evalflow_attempts WHERE run_id = $1 AND key = $2`,
		runID, at.Key).Scan(&last); err != nil {
		return results.Attempt{}, err
	}
	at.N = max(at.N, last+1)
	at.File = results.AttemptName(at.Key, at.N)
	body, err := json.Marshal(at)
	if err != nil {
		return results.Attempt{}, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO evalflow_attempts (run_id, key, n, error, size, trace) VALUES ($1, $2, $3, $4, $5, $6)`,
		runID, at.Key, at.N, at.Error, len(body), s.enc.EncodeAll(body, nil)); err != nil {
		return results.Attempt{}, err
	}
	return at, nil
}

// PutAttempt stores the trace of an attempt that ended without a record.
func (s *Store) PutAttempt(ctx context.Context, runID string, at results.Attempt) (results.Attempt, error) {
	if err := check(runID, at.Key); err != nil {
		return results.Attempt{}, err
	}
	var out results.Attempt
	err := s.retry(ctx, "store an attempt of "+at.Key, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey(runID, at.Key)); err != nil {
				return err
			}
			var err error
			out, err = s.insertAttempt(ctx, tx, runID, at)
			return err
		})
	})
	return out, err
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func getRecord(ctx context.Context, q querier, runID, key string) (results.Record, bool, error) {
	var body []byte
	err := q.QueryRow(ctx, `SELECT record FROM evalflow_rollouts WHERE run_id = $1 AND key = $2`, runID, key).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		return results.Record{}, false, nil
	}
	if err != nil {
		return results.Record{}, false, err
	}
	var rec results.Record
	if err := json.Unmarshal(body, &rec); err != nil {
		return results.Record{}, false, fmt.Errorf("decode record %s: %w", key, err)
	}
	return rec, true, nil
}

// Get returns the stored record of key in a run.
func (s *Store) Get(ctx context.Context, runID, key string) (results.Record, bool, error) {
	if err := check(runID, key); err != nil {
		return results.Record{}, false, err
	}
	var (
		rec results.Record
		ok  bool
	)
	err := s.retry(ctx, "read "+key, func(ctx context.Context) error {
		var err error
		rec, ok, err = getRecord(ctx, s.pool, runID, key)
		return err
	})
	return rec, ok, err
}

// List returns a run's records in the order they were first stored.
func (s *Store) List(ctx context.Context, runID string) ([]results.Record, error) {
	if err := check(runID, ""); err != nil {
		return nil, err
	}
	var out []results.Record
	err := s.retry(ctx, "list the rollouts of "+runID, func(ctx context.Context) error {
		out = nil
		rows, err := s.pool.Query(ctx, `SELECT record FROM evalflow_rollouts WHERE run_id = $1 ORDER BY seq`, runID)
		if err != nil {
			return err
		}
		var body []byte
		_, err = pgx.ForEachRow(rows, []any{&body}, func() error {
			var rec results.Record
			if err := json.Unmarshal(body, &rec); err != nil {
				return fmt.Errorf("decode a record of %s: %w", runID, err)
			}
			out = append(out, rec)
			return nil
		})
		return err
	})
	return out, err
}

// Trace reads the trace of the attempt that made a rollout's record (or,
// without a record, a trace stored with no attempt number).
func (s *Store) Trace(ctx context.Context, runID, key string) (*trace.Rollout, error) {
	rec, ok, err := s.Get(ctx, runID, key)
	if err != nil {
		return nil, err
	}
	n := 0
	if ok && rec.Trace != "" {
		n = rec.Attempt
	}
	var at results.Attempt
	err = s.retry(ctx, "read the trace of "+key, func(ctx context.Context) error {
		var blob []byte
		err := s.pool.QueryRow(ctx, `SELECT trace FROM evalflow_attempts WHERE run_id = $1 AND key = $2 AND n = $3`,
			runID, key, n).Scan(&blob)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("read trace %s: %w", key, fs.ErrNotExist)
		}
		if err != nil {
			return err
		}
		return s.decode(blob, &at)
	})
	if err != nil {
		return nil, err
	}
	return &at.Rollout, nil
}

// Attempts returns every stored attempt of a rollout, oldest first.
func (s *Store) Attempts(ctx context.Context, runID, key string) ([]results.Attempt, error) {
	if err := check(runID, key); err != nil {
		return nil, err
	}
	var out []results.Attempt
	err := s.retry(ctx, "read the attempts of "+key, func(ctx context.Context) error {
		out = []results.Attempt{}
		rows, err := s.pool.Query(ctx, `SELECT n, trace FROM evalflow_attempts WHERE run_id = $1 AND key = $2 ORDER BY n`, runID, key)
		if err != nil {
			return err
		}
		var (
			n    int
			blob []byte
		)
		_, err = pgx.ForEachRow(rows, []any{&n, &blob}, func() error {
			var at results.Attempt
			if err := s.decode(blob, &at); err != nil {
				return fmt.Errorf("read attempt %d of %s: %w", n, key, err)
			}
			at.N, at.File = n, results.AttemptName(key, n)
			out = append(out, at)
			return nil
		})
		return err
	})
	return out, err
}

func (s *Store) decode(blob []byte, v any) error {
	body, err := s.dec.DecodeAll(blob, nil)
	if err != nil {
		return fmt.Errorf("decompress trace: %w", err)
	}
	return json.Unmarshal(body, v)
}

// PutGroup stores a group record once.
func (s *Store) PutGroup(ctx context.Context, runID string, g results.Group) (results.Group, bool, error) {
	if err := check(runID, g.Key); err != nil {
		return results.Group{}, false, err
	}
	body, err := json.Marshal(g)
	if err != nil {
		return results.Group{}, false, err
	}
	var (
		out     results.Group
		existed bool
	)
	err = s.retry(ctx, "store group "+g.Key, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, `INSERT INTO evalflow_groups (run_id, key, body) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
			runID, g.Key, body)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			out, existed = g, false
			return nil
		}
		var stored []byte
		if err := s.pool.QueryRow(ctx, `SELECT body FROM evalflow_groups WHERE run_id = $1 AND key = $2`, runID, g.Key).Scan(&stored); err != nil {
			return err
		}
		existed = true
		return json.Unmarshal(stored, &out)
	})
	return out, existed, err
}

// WriteEpoch records a finished epoch's result.
func (s *Store) WriteEpoch(ctx context.Context, runID string, epoch int, v any) error {
	return s.upsert(ctx, runID, fmt.Sprintf("epoch %d", epoch), `
INSERT INTO evalflow_epochs (run_id, epoch, body) VALUES ($1, $3, $2)
ON CONFLICT (run_id, epoch) DO UPDATE SET body = EXCLUDED.body, stored_at = now()`, v, epoch)
}

// ReadEpoch decodes a finished epoch's result into v.
func (s *Store) ReadEpoch(ctx context.Context, runID string, epoch int, v any) error {
	return s.read(ctx, runID, fmt.Sprintf("epoch %d", epoch),
		`SELECT body FROM evalflow_epochs WHERE run_id = $1 AND epoch = $2`, v, epoch)
}

// Epochs lists the epochs of a run recorded as finished, in order.
func (s *Store) Epochs(ctx context.Context, runID string) ([]int, error) {
	if err := check(runID, ""); err != nil {
		return nil, err
	}
	var out []int
	err := s.retry(ctx, "list the epochs of "+runID, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `SELECT epoch FROM evalflow_epochs WHERE run_id = $1 ORDER BY epoch`, runID)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[int])
		return err
	})
	if len(out) == 0 {
		out = nil
	}
	return out, err
}

// WriteSummary stores v as the run's summary.
func (s *Store) WriteSummary(ctx context.Context, runID string, v any) error {
	return s.upsert(ctx, runID, "summary", `
INSERT INTO evalflow_summaries (run_id, body) VALUES ($1, $2)
ON CONFLICT (run_id) DO UPDATE SET body = EXCLUDED.body, stored_at = now()`, v)
}

// ReadSummary decodes the run's summary into v.
func (s *Store) ReadSummary(ctx context.Context, runID string, v any) error {
	return s.read(ctx, runID, "summary", `SELECT body FROM evalflow_summaries WHERE run_id = $1`, v)
}

func (s *Store) upsert(ctx context.Context, runID, what, sql string, v any, args ...any) error {
	if err := check(runID, ""); err != nil {
		return err
	}
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("write %s of %s: %w", what, runID, err)
	}
	return s.retry(ctx, "write "+what+" of "+runID, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, sql, append([]any{runID, body}, args...)...)
		return err
	})
}

func (s *Store) read(ctx context.Context, runID, what, sql string, v any, args ...any) error {
	if err := check(runID, ""); err != nil {
		return err
	}
	var body []byte
	err := s.retry(ctx, "read "+what+" of "+runID, func(ctx context.Context) error {
		err := s.pool.QueryRow(ctx, sql, append([]any{runID}, args...)...).Scan(&body)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("read %s of %s: %w", what, runID, fs.ErrNotExist)
		}
		return err
	})
	if err != nil {
		return err
	}
	return json.Unmarshal(body, v)
}

// Runs lists the ids of the runs that have a record, a summary or a
// finished epoch, sorted.
func (s *Store) Runs(ctx context.Context) ([]string, error) {
	var out []string
	err := s.retry(ctx, "list runs", func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `
SELECT run_id FROM evalflow_rollouts UNION SELECT run_id FROM evalflow_summaries
UNION SELECT run_id FROM evalflow_epochs ORDER BY 1`)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return out, err
}

// Stat says whether the database holds anything of the run and when a
// record of it was last stored.
func (s *Store) Stat(ctx context.Context, runID string) (results.RunStat, error) {
	if err := check(runID, ""); err != nil {
		return results.RunStat{}, err
	}
	var (
		st       results.RunStat
		modified *time.Time
	)
	err := s.retry(ctx, "stat "+runID, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `
SELECT (SELECT max(stored_at) FROM evalflow_rollouts WHERE run_id = $1),
	EXISTS (SELECT 1 FROM evalflow_rollouts WHERE run_id = $1)
	OR EXISTS (SELECT 1 FROM evalflow_attempts WHERE run_id = $1)
	OR EXISTS (SELECT 1 FROM evalflow_summaries WHERE run_id = $1)
	OR EXISTS (SELECT 1 FROM evalflow_epochs WHERE run_id = $1)
	OR EXISTS (SELECT 1 FROM evalflow_groups WHERE run_id = $1)`, runID).Scan(&modified, &st.Exists)
	})
	if modified != nil {
		st.Modified = modified.UTC()
	}
	return st, err
}

// check validates a run id and, when not empty, a key, with the rules of
// results.Files, so that a run can move between stores.
func check(runID, key string) error {
	if err := results.ValidateRunID(runID); err != nil {
		return err
	}
	if key != "" {
		return results.ValidateKey(key)
	}
	return nil
}

// redactURL returns the URL to show (no password, no query) and the
// password to keep out of errors.
func redactURL(raw string) (where, secret string) {
	u, err := url.Parse(raw)
	if err != nil {
		return "postgres://(unparsable URL)", ""
	}
	if u.User != nil {
		secret, _ = u.User.Password()
		u.User = url.User(u.User.Username())
	}
	if secret == "" {
		secret = u.Query().Get("password")
	}
	u.RawQuery, u.Fragment = "", ""
	return u.String(), secret
}

// Redact is rawURL as it may be shown: without its password or query.
func Redact(rawURL string) string {
	where, _ := redactURL(rawURL)
	return where
}

// Ping connects to the database at rawURL once and reports whether it
// answers, for a process that waits for its database at start. The error
// holds no password.
func Ping(ctx context.Context, rawURL string) error {
	where, secret := redactURL(rawURL)
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return fmt.Errorf("run store %s: %w", where, redactErr(err, secret))
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("run store %s: %w", where, redactErr(err, secret))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.Ping(ctx); err != nil {
		return fmt.Errorf("run store %s: %w", where, redactErr(err, secret))
	}
	return nil
}
