package main

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/run"
)

// resumeSettings are the run settings given on resume's command line.
func resumeSettings(cctx *cli.Context) (run.Settings, error) {
	given, err := runConfig(cctx)
	if err != nil {
		return run.Settings{}, err
	}
	train, err := trainConfig(cctx)
	if err != nil {
		return run.Settings{}, err
	}
	return run.Settings{
		Config:    given,
		Train:     train,
		Given:     cctx.IsSet,
		Retaskset: retaskset(cctx),
	}, nil
}

// flagNames names settings as the flags that give them (--tasks).
func flagNames(settings []string) []string {
	var flags []string
	for _, s := range settings {
		flags = append(flags, "--"+s)
	}
	return flags
}

// newStoreAccount reads what the store sc names holds for a run now; the
// returned func closes the store.
func newStoreAccount(ctx context.Context, sc wiring.StoreConfig, runID string) (*run.Account, func()) {
	store, err := openStore(ctx, sc)
	if err != nil {
		return run.NewAccount(ctx, nil, runID), func() {}
	}
	return run.NewAccount(ctx, store, runID), func() { _ = store.Close() }
}
