package main

import (
	"context"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/results"
)

// storeFlags is the run store a command's flags name: --store, else files
// under --runs-dir.
func storeFlags(cctx *cli.Context) wiring.StoreConfig { return wiring.StoreFromFlags(cctx) }

// openStore opens the run store sc names; the caller closes it.
func openStore(ctx context.Context, sc wiring.StoreConfig) (results.Store, error) {
	return wiring.OpenStore(ctx, sc, nil)
}

// runLocation tells a person where a run's results are: its directory, or
// the database (without its password) and the run.
func runLocation(sc wiring.StoreConfig, runID string) string {
	if sc.URL != "" {
		return sc.String() + " (run " + runID + ")"
	}
	dir := sc.RunsDir
	if dir == "" {
		dir = "runs"
	}
	return filepath.Join(dir, runID) + string(filepath.Separator)
}

// storeHint names the flags that pick a store, for an error that did not
// find a run.
func storeHint(sc wiring.StoreConfig) string {
	if sc.URL != "" {
		return "--store"
	}
	return "--runs-dir"
}
