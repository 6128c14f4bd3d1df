package wiring

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/postgres"
)

// StoreConfig locates the run store: a PostgreSQL database when URL is
// set, else the files under RunsDir.
type StoreConfig struct {
	// URL is the PostgreSQL store's postgres://user:password@host/db. It
	// holds the password, so it comes only from the process's flags or
	// environment, is never logged and never goes into a run's config.
	URL string `json:"-"`
	// RunsDir is the files store's root ("runs" if empty).
	RunsDir string
}

// StoreFromFlags reads --store and --runs-dir.
func StoreFromFlags(cctx *cli.Context) StoreConfig {
	return StoreConfig{URL: cctx.String(FlagStore), RunsDir: cctx.String(FlagRunsDir)}
}

// String names the store for people: the database without its password,
// or the runs directory.
func (c StoreConfig) String() string {
	if c.URL != "" {
		return postgres.Redact(c.URL)
	}
	return c.dir()
}

func (c StoreConfig) dir() string {
	if c.RunsDir == "" {
		return "runs"
	}
	return c.RunsDir
}

// check refuses a --store that is not a PostgreSQL URL, without showing it.
func (c StoreConfig) check() error {
	if c.URL != "" && !postgres.IsURL(c.URL) {
		return fmt.Errorf("--%s: want a postgres:// or postgresql:// URL (or nothing for files under --%s)", FlagStore, FlagRunsDir)
	}
	return nil
}

// OpenStore opens the run store c names. The files store is checked to be
// writable, as a store a worker cannot write would fail every rollout; the
// PostgreSQL store creates or migrates its schema.
func OpenStore(ctx context.Context, c StoreConfig, logger *slog.Logger) (results.Store, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if c.URL != "" {
		return postgres.Open(ctx, c.URL, postgres.Options{Logger: logger})
	}
	return openFiles(c.dir())
}

// openFiles opens the files store and checks that this process can write
// to it.
func openFiles(dir string) (*results.Files, error) {
	store, err := results.Open(dir)
	if err != nil {
		return nil, err // results says "open run store"
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return nil, fmt.Errorf("run store %s is not writable (--runs-dir): %w", dir, err)
	}
	name := f.Name()
	err = f.Close()
	if rerr := os.Remove(name); err == nil {
		err = rerr
	}
	if err != nil {
		return nil, fmt.Errorf("run store %s is not writable (--runs-dir): %w", dir, err)
	}
	return store, nil
}
