package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations are the schema's versions, in order: migration i makes version
// i+1. A released migration never changes; a new one is appended.
var migrations = []string{
	// 1: rollout records, every attempt's trace, groups, epochs, summaries.
	`
CREATE TABLE evalflow_rollouts (
	run_id    text        NOT NULL,
	key       text        NOT NULL,
	seq       bigserial   NOT NULL,
	status    text        NOT NULL,
	attempt   integer     NOT NULL,
	record    json        NOT NULL,
	stored_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (run_id, key)
);
CREATE INDEX evalflow_rollouts_order ON evalflow_rollouts (run_id, seq);
CREATE TABLE evalflow_attempts (
	run_id    text        NOT NULL,
	key       text        NOT NULL,
	n         integer     NOT NULL,
	error     text        NOT NULL DEFAULT '',
	size      integer     NOT NULL,
	trace     bytea       NOT NULL,
	stored_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (run_id, key, n)
);
CREATE TABLE evalflow_groups (
	run_id text NOT NULL,
	key    text NOT NULL,
	body   json NOT NULL,
	PRIMARY KEY (run_id, key)
);
CREATE TABLE evalflow_epochs (
	run_id    text        NOT NULL,
	epoch     integer     NOT NULL,
	body      json        NOT NULL,
	stored_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (run_id, epoch)
);
CREATE TABLE evalflow_summaries (
	run_id    text        PRIMARY KEY,
	body      json        NOT NULL,
	stored_at timestamptz NOT NULL DEFAULT now()
);
`,
}

// SchemaVersion is the version of the schema this build creates and reads.
var SchemaVersion = len(migrations)

// ErrSchemaTooNew is returned by Open when the database holds a schema of a
// newer evalflow than this one: it refuses to write what it may not
// understand.
var ErrSchemaTooNew = errors.New("the database's evalflow schema is newer than this build")

// migrationLock is the advisory lock that makes concurrent starts migrate
// one at a time (any fixed number; this one spells "evalflow").
const migrationLock = 0x6576616c666c6f77

// migrate brings the schema to SchemaVersion, one transaction per
// migration, recording each in evalflow_schema. It takes a session
// advisory lock so that workers starting together migrate once.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(migrationLock)); err != nil {
		return fmt.Errorf("lock schema: %w", err)
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(migrationLock))
	}()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS evalflow_schema (
	version    integer     PRIMARY KEY,
	applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
		return fmt.Errorf("create schema table: %w", err)
	}
	var current int
	if err := conn.QueryRow(ctx, `SELECT COALESCE(max(version), 0) FROM evalflow_schema`).Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if current > SchemaVersion {
		return fmt.Errorf("%w: the database is at version %d, this build knows versions up to %d; upgrade evalflow",
			ErrSchemaTooNew, current, SchemaVersion)
	}
	for v := current + 1; v <= SchemaVersion; v++ {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO evalflow_schema (version) VALUES ($1)`, v)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate schema to version %d: %w", v, err)
		}
	}
	return nil
}
