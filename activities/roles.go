package activities

import (
	"fmt"
	"slices"
	"strings"

	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/rollout"
)

// route finds the providers a role of a run names among this worker's.
// A provider the worker lacks is a configuration error of the run, never
// the agent's failure: the error names it and how to configure it.
func (a *Activities) route(role string, r rollout.Route) ([]interception.Target, error) {
	if len(r) == 0 {
		return nil, nil
	}
	targets := make([]interception.Target, 0, len(r))
	for _, t := range r {
		p, ok := a.Providers[t.Provider]
		if !ok || p == nil {
			return nil, configErr(fmt.Errorf("role %s: this worker has no provider %q (it has %s): start it with --provider %s=URL and the key in %s",
				role, t.Provider, a.providerNames(), t.Provider, rollout.ProviderKeyEnv(t.Provider)))
		}
		targets = append(targets, interception.Target{Name: t.Provider, Upstream: p, Model: t.Model})
	}
	return targets, nil
}

// providerNames lists the worker's providers for an error message.
func (a *Activities) providerNames() string {
	names := make([]string, 0, len(a.Providers))
	for n := range a.Providers {
		names = append(names, n)
	}
	if len(names) == 0 {
		return "none by name"
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
