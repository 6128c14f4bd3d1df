// Package pgtest gives tests a PostgreSQL database of their own: a fresh
// schema in the server EVALFLOW_TEST_POSTGRES names (default: the loopback
// database .ci/run sets up). A test that cannot reach it fails; it does not
// skip.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// Env names the variable holding the test server's URL.
const Env = "EVALFLOW_TEST_POSTGRES"

// DefaultURL is the database .ci/run creates on loopback.
const DefaultURL = "postgres://evalflow:evalflow@127.0.0.1:5432/evalflow_test?sslmode=disable"

// ServerURL is the test server's URL.
func ServerURL() string {
	if u := os.Getenv(Env); u != "" {
		return u
	}
	return DefaultURL
}

// URL creates a schema of its own for t (dropped when t ends) and returns
// the server's URL with that schema as its search path: a store opened on
// it sees only what t writes.
func URL(t testing.TB) string {
	t.Helper()
	base := ServerURL()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	require.NoError(t, err, "reach the test PostgreSQL (set %s; .ci/run sets one up)", Env)
	defer conn.Close(context.Background())
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "t_" + hex.EncodeToString(b)
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, base); err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			_ = c.Close(ctx)
		}
	})
	u, err := url.Parse(base)
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
