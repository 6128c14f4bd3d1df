// Package pgtest gives tests a PostgreSQL database of their own: a fresh
// schema in the server EVALFLOW_TEST_POSTGRES names, else in the tests' own
// cluster that make setup starts (its URL is in the checkout's
// .evalflow/test-postgres-url). A test that cannot reach it fails; it does
// not skip.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// Env names the variable holding the test server's URL.
const Env = "EVALFLOW_TEST_POSTGRES"

// URLFile is where make setup (scripts/setup.sh) writes the URL of the
// tests' own cluster, relative to the checkout's root.
const URLFile = ".evalflow/test-postgres-url"

// ServerURL is the test server's URL: EVALFLOW_TEST_POSTGRES, else the one
// in URLFile of the checkout holding the working directory, else "" (a test
// then fails saying how to set one up).
func ServerURL() string {
	if u := os.Getenv(Env); u != "" {
		return u
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, URLFile)); err == nil {
			return strings.TrimSpace(string(b))
		}
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// connect reaches the test server, failing t with how to set one up.
func connect(ctx context.Context, t testing.TB, base string) *pgx.Conn {
	t.Helper()
	require.NotEmpty(t, base, "no test PostgreSQL: run make setup (or set %s)", Env)
	conn, err := pgx.Connect(ctx, base)
	require.NoError(t, err, "reach the test PostgreSQL (run make setup, or set %s)", Env)
	return conn
}

// URLWithOwnRole is URL with a role of its own for t, whose password is
// random: a test can look for that password in logs and histories and
// know any hit is a leak. The server's user needs CREATEROLE (make setup
// grants it). It returns the URL and the password.
func URLWithOwnRole(t testing.TB) (string, string) {
	t.Helper()
	base := ServerURL()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := connect(ctx, t, base)
	defer conn.Close(context.Background())
	name := "t_" + randomHex(6)
	password := "pw-" + randomHex(12)
	_, err := conn.Exec(ctx, "CREATE ROLE "+name+" LOGIN PASSWORD '"+password+"'")
	require.NoError(t, err, "create a test role (the test user needs CREATEROLE)")
	var db string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_database()").Scan(&db))
	_, err = conn.Exec(ctx, "GRANT CREATE, CONNECT ON DATABASE "+pgx.Identifier{db}.Sanitize()+" TO "+name)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "GRANT "+name+" TO CURRENT_USER")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+name+" AUTHORIZATION "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, base); err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA "+name+" CASCADE")
			_, _ = c.Exec(ctx, "REVOKE ALL ON DATABASE "+pgx.Identifier{db}.Sanitize()+" FROM "+name)
			_, _ = c.Exec(ctx, "DROP ROLE "+name)
			_ = c.Close(ctx)
		}
	})
	u, err := url.Parse(base)
	require.NoError(t, err)
	u.User = url.UserPassword(name, password)
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String(), password
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// URL creates a schema of its own for t (dropped when t ends) and returns
// the server's URL with that schema as its search path: a store opened on
// it sees only what t writes.
func URL(t testing.TB) string {
	t.Helper()
	base := ServerURL()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := connect(ctx, t, base)
	defer conn.Close(context.Background())
	schema := "t_" + randomHex(6)
	_, err := conn.Exec(ctx, "CREATE SCHEMA "+schema)
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
