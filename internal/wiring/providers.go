package wiring

import (
	"fmt"
	"os"
	"strings"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/rollout"
)

// Provider is a named provider of the worker (--provider), for the roles
// of runs (rollout.Roles) to pick by name. Its API key is read from the
// environment variable rollout.ProviderKeyEnv(Name) when the worker
// starts: never a flag, a file of the run, or a log line.
type Provider struct {
	Name    string
	Dialect string
	URL     string
}

// ParseProvider parses NAME=URL or NAME=DIALECT:URL, e.g.
// judge-host=anthropic:https://api.anthropic.com/v1. Without a dialect the
// provider speaks chat, as --upstream-dialect's default.
func ParseProvider(s string) (Provider, error) {
	name, rest, ok := strings.Cut(s, "=")
	if !ok || rest == "" {
		return Provider{}, fmt.Errorf("--%s %q: want NAME=URL or NAME=DIALECT:URL, e.g. backup=https://api.example.com/v1 or claude=anthropic:https://api.anthropic.com/v1", flagProvider, s)
	}
	if err := rollout.CheckProviderName(name); err != nil {
		return Provider{}, fmt.Errorf("--%s %q: %w", flagProvider, s, err)
	}
	p := Provider{Name: name, Dialect: dialects.NameChat, URL: rest}
	for _, d := range []string{dialects.NameChat, dialects.NameResponses, dialects.NameAnthropic} {
		if u, ok := strings.CutPrefix(rest, d+":"); ok {
			p.Dialect, p.URL = d, u
		}
	}
	if !strings.HasPrefix(p.URL, "http://") && !strings.HasPrefix(p.URL, "https://") {
		return Provider{}, fmt.Errorf("--%s %q: the URL must start with http:// or https:// (a dialect before it is chat, responses or anthropic)", flagProvider, s)
	}
	if p.Name == rollout.DefaultProvider {
		return Provider{}, fmt.Errorf("--%s %q: %q is the worker's own provider (--%s); give this one another name", flagProvider, s, rollout.DefaultProvider, FlagBaseURL)
	}
	return p, nil
}

// parseProviders parses every --provider, refusing a name given twice.
func parseProviders(values []string) ([]Provider, error) {
	var ps []Provider
	seen := map[string]bool{}
	for _, v := range values {
		p, err := ParseProvider(v)
		if err != nil {
			return nil, err
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("--%s %s: the name is given twice", flagProvider, p.Name)
		}
		seen[p.Name] = true
		ps = append(ps, p)
	}
	return ps, nil
}

// client builds the provider's client, its key from the environment.
func (p Provider) client(limits UpstreamLimits) (*providers.Client, error) {
	c, err := providers.New(p.Dialect, p.URL, os.Getenv(rollout.ProviderKeyEnv(p.Name)))
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", p.Name, err)
	}
	limits.apply(c)
	return c, nil
}

// parseClaudeModels parses every --claude-model NAME=CLAUDE.
func parseClaudeModels(values []string) (map[string]string, error) {
	if len(values) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(values))
	for _, v := range values {
		name, claude, ok := strings.Cut(v, "=")
		name, claude = strings.TrimSpace(name), strings.TrimSpace(claude)
		switch {
		case !ok || name == "" || claude == "":
			return nil, fmt.Errorf("--%s %q: want NAME=CLAUDE, e.g. sonnet=claude-sonnet-4-6", flagClaudeModel, v)
		case !strings.Contains(strings.ToLower(claude), "claude"):
			return nil, fmt.Errorf("--%s %q: %s is not a Claude model's name (claude-…)", flagClaudeModel, v, claude)
		case out[name] != "":
			return nil, fmt.Errorf("--%s %s: the name is given twice", flagClaudeModel, name)
		}
		out[name] = claude
	}
	return out, nil
}
