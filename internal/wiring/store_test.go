package wiring

import (
	"bytes"
	"context"
	"log/slog"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/results/postgres/pgtest"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/postgres"
)

func TestOpenStorePicksTheStore(t *testing.T) {
	ctx := context.Background()
	files, err := OpenStore(ctx, StoreConfig{RunsDir: t.TempDir()}, nil)
	require.NoError(t, err)
	assert.IsType(t, &results.Files{}, files)

	db, err := OpenStore(ctx, StoreConfig{URL: pgtest.URL(t)}, slog.Default())
	require.NoError(t, err)
	defer db.Close()
	assert.IsType(t, &postgres.Store{}, db)
}

// A store URL's password reaches no error, log line or name of the store.
func TestStoreURLPasswordIsNeverShown(t *testing.T) {
	const password = "s3cret-Pa55word"
	u, err := url.Parse(pgtest.ServerURL())
	require.NoError(t, err)
	u.User = url.UserPassword(u.User.Username(), password) // the wrong one
	bad := u.String()

	var logs bytes.Buffer
	cfg := Config{StoreURL: bad, RunsDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	assert.NotContains(t, cfg.StoreName(), password)
	assert.Contains(t, cfg.StoreName(), u.Hostname())
	_, err = OpenStore(context.Background(), cfg.store(), cfg.Logger)
	require.Error(t, err, "a wrong password is refused")
	assert.NotContains(t, err.Error(), password)
	assert.NotContains(t, logs.String(), password)

	_, err = OpenStore(context.Background(), StoreConfig{URL: "mysql://root:" + password + "@db/x"}, nil)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), password)
	assert.Contains(t, err.Error(), "postgres://")

	_, err = parseWorker(t, "--store", "sqlite://u:"+password+"@h/db")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), password)
}
