package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/run"
	"github.com/evalflow/evalflow/tasksets"
)

// registryFlag names the registry a --taskset name@version resolves through.
var registryFlag = &cli.StringFlag{
	Name:    "registry",
	EnvVars: []string{tasksets.RegistryEnv},
	Usage:   "registry --taskset name@version or org/name@version resolves through: a registry.json (Harbor's format), a file or an http(s) URL, or a package registry's URL; default Harbor's (its registry.json for name@version, its package registry for org/name@version)",
}

// resolveTaskset resolves a --taskset naming a registry dataset
// (name@version, org/name@version) to the reference the run carries:
// every task's repository and commit, or archive and digest. Any other
// taskset is returned as it is.
func resolveTaskset(cctx *cli.Context, ref string) (string, error) {
	if !tasksets.IsDatasetRef(ref) {
		return ref, nil
	}
	l, err := tasksets.ResolveDataset(cctx.Context, cctx.String(registryFlag.Name), ref)
	if err != nil {
		return "", fmt.Errorf("--taskset %s: %w", ref, err)
	}
	return l.Ref(), nil
}

// changedError explains a refused change of a run's settings, naming the
// tasks of a registry dataset that now resolve to other commits; how
// tells what to do instead.
func changedError(changed *run.ChangedError, how string) error {
	msg := fmt.Sprintf("run %s was started with other settings (%s)", changed.RunID, strings.Join(flagNames(changed.Settings), ", "))
	was, okWas, _ := tasksets.ParseLock(changed.Was.Taskset)
	now, okNow, _ := tasksets.ParseLock(changed.Now.Taskset)
	if okWas && okNow && was.String() == now.String() {
		msg += fmt.Sprintf("; taskset %s now resolves to other tasks: %s", now, strings.Join(tasksets.LockChanges(was, now), "; "))
	}
	return errors.New(msg + "; " + how)
}

// retaskset resolves a run's registry dataset again when a registry is
// named (--registry or EVALFLOW_REGISTRY), so that a resume finds the
// dataset at other commits; nil when none is.
func retaskset(cctx *cli.Context) func(stored string) (string, error) {
	if cctx.String(registryFlag.Name) == "" {
		return nil
	}
	return func(stored string) (string, error) {
		l, ok, _ := tasksets.ParseLock(stored)
		if !ok {
			return "", nil
		}
		return resolveTaskset(cctx, l.String())
	}
}
