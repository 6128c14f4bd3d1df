package rollout

import (
	"fmt"
	"strings"
)

// The model roles of a run.
const (
	// RolePolicy is the agent's own model calls, through the interception.
	RolePolicy = "policy"
	// RoleJudge is the calls of a rubric's judge part.
	RoleJudge = "judge"
	// RoleUser is the calls of a task's simulated user (the persona).
	RoleUser = "user"
)

// DefaultProvider names the worker's own upstream (--base-url, or the
// offline mock model): the provider of every role a run names none for.
const DefaultProvider = "default"

// Target is one provider a role calls, and the model asked there; an
// empty model is the one the role would ask anyway (the run's --model, the
// rubric's judge model, the persona's).
type Target struct {
	Provider string `json:"provider"`
	Model    string `json:"model,omitempty"`
}

// Route is the providers of a role: the first is called, each next one
// only when the one before failed for the infrastructure (it could not be
// reached, timed out, or answered 429 or 5xx after its retries), never
// when it refused the request (another 4xx).
type Route []Target

// Roles are a run's model roles by name. A role left empty calls the
// worker's default provider. Only names travel in a run: each worker
// holds its providers' URLs and keys.
type Roles struct {
	Policy Route `json:"policy,omitempty"`
	Judge  Route `json:"judge,omitempty"`
	User   Route `json:"user,omitempty"`
}

// Empty reports whether no role is set.
func (r Roles) Empty() bool { return len(r.Policy) == 0 && len(r.Judge) == 0 && len(r.User) == 0 }

// Providers are the provider names the roles use, each once, in the order
// policy, judge, user.
func (r Roles) Providers() []string {
	var names []string
	seen := map[string]bool{}
	for _, route := range []Route{r.Policy, r.Judge, r.User} {
		for _, t := range route {
			if !seen[t.Provider] {
				seen[t.Provider] = true
				names = append(names, t.Provider)
			}
		}
	}
	return names
}

// Set parses one role setting, ROLE=PROVIDER[:MODEL][,PROVIDER[:MODEL]…],
// e.g. judge=anthropic:claude-sonnet-4-5,backup, and sets that role.
// A model may hold colons (llama3:8b): only the first one splits.
func (r *Roles) Set(s string) error {
	role, list, ok := strings.Cut(s, "=")
	role = strings.TrimSpace(role)
	if !ok || strings.TrimSpace(list) == "" {
		return fmt.Errorf("role %q: want ROLE=PROVIDER[:MODEL][,FALLBACK[:MODEL]…], e.g. judge=anthropic:claude-sonnet-4-5,backup", s)
	}
	var route Route
	for item := range strings.SplitSeq(list, ",") {
		name, model, _ := strings.Cut(strings.TrimSpace(item), ":")
		if err := CheckProviderName(name); err != nil {
			return fmt.Errorf("role %s: %w", role, err)
		}
		route = append(route, Target{Provider: name, Model: model})
	}
	switch role {
	case RolePolicy:
		for _, t := range route {
			if t.Model != "" {
				return fmt.Errorf("role policy: %s:%s: the policy's model is the run's --model; name its providers only (policy=%s)", t.Provider, t.Model, t.Provider)
			}
		}
		r.Policy = route
	case RoleJudge:
		r.Judge = route
	case RoleUser:
		r.User = route
	default:
		return fmt.Errorf("role %q: unknown role (want policy, judge or user)", role)
	}
	return nil
}

// CheckProviderName refuses a provider name that is not letters, digits,
// '-' and '_' (it names an environment variable too).
func CheckProviderName(name string) error {
	if name == "" {
		return fmt.Errorf("empty provider name")
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("provider name %q: letters, digits, '-' and '_' only", name)
		}
	}
	return nil
}

// ProviderKeyEnv is the environment variable a worker reads the API key of
// the named provider from: EVALFLOW_PROVIDER_<NAME>_API_KEY, the name in
// upper case with '-' as '_'. Keys are never part of a run.
func ProviderKeyEnv(name string) string {
	return "EVALFLOW_PROVIDER_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_API_KEY"
}
