package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/rollout"
)

// roleFlag is --role: one role setting per use of the flag, kept as given
// (a role's fallbacks are separated by commas).
func roleFlag() cli.Flag {
	return &cli.GenericFlag{Name: "role", Value: &envEntries{},
		Usage: "`ROLE=PROVIDER[:MODEL][,FALLBACK[:MODEL]…]`: the providers, named by the workers' --provider (or default), that the role policy, judge or user calls, each fallback tried in order when the one before fails for the infrastructure, e.g. judge=claude:claude-sonnet-4-5,backup (repeat the flag per role; the policy's model is --model)"}
}

// roles parses the settings --role was given.
func roles(cctx *cli.Context) (rollout.Roles, error) {
	var r rollout.Roles
	e, ok := cctx.Generic("role").(*envEntries)
	if !ok || e == nil {
		return r, nil
	}
	for _, s := range *e {
		if err := r.Set(s); err != nil {
			return r, fmt.Errorf("--role: %w", err)
		}
	}
	return r, nil
}
