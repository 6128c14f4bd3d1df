package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// envEntries is the value of --harness-env: KEY=VALUE entries, one per
// use of the flag, kept as given (a value may hold commas).
type envEntries []string

var _ cli.Generic = (*envEntries)(nil)

func (e *envEntries) Set(v string) error {
	*e = append(*e, v)
	return nil
}

func (e *envEntries) String() string {
	if e == nil {
		return ""
	}
	return strings.Join(*e, " ")
}

// Get is the entries as a list, as a run file holds them.
func (e *envEntries) Get() any { return []string(*e) }

// harnessEnvFlag is --harness-env.
func harnessEnvFlag() cli.Flag {
	return &cli.GenericFlag{Name: "harness-env", Value: &envEntries{},
		Usage: "`KEY=VALUE` added to every harness's environment (repeat the flag for more); stored with the run, so never a credential: names like *_KEY, *_TOKEN, *_SECRET or *PASSWORD* are refused (credentials stay in the worker's environment)"}
}

// harnessEnv is the entries --harness-env was given.
func harnessEnv(cctx *cli.Context) []string {
	e, ok := cctx.Generic("harness-env").(*envEntries)
	if !ok || e == nil || len(*e) == 0 {
		return nil
	}
	return append([]string(nil), *e...)
}
