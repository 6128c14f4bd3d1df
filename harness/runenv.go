package harness

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// SDKTimeoutVars are the variables provider SDKs read their request timeout
// from (seconds): the OpenAI and Anthropic SDKs, and httpx under both.
var SDKTimeoutVars = []string{"OPENAI_TIMEOUT", "OPENAI_REQUEST_TIMEOUT", "HTTPX_TIMEOUT", "ANTHROPIC_TIMEOUT"}

// SDKTimeoutEnv sets every SDKTimeoutVars to d in whole seconds, rounded
// up; d <= 0 sets none. A harness's SDK then waits as long as the
// interception server may take to begin an answer, instead of giving up
// (and retrying on its own) while the server is still retrying the
// provider.
func SDKTimeoutEnv(d time.Duration) []string {
	if d <= 0 {
		return nil
	}
	secs := strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10)
	env := make([]string, 0, len(SDKTimeoutVars))
	for _, name := range SDKTimeoutVars {
		env = append(env, name+"="+secs)
	}
	return env
}

// contractNames are the variables of the env contract (see Env): a run's
// own environment cannot replace them.
var contractNames = []string{
	"OPENAI_BASE_URL", "OPENAI_MODEL", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL", "HOME",
}

// IsCredentialName reports whether a variable name looks like a credential
// by the stricter rule a run's own environment is held to (CheckRunEnv):
// IsSecretName, or any name ending in _KEY, _TOKEN or _SECRET, or holding
// PASSWORD or PASSWD.
func IsCredentialName(name string) bool {
	upper := strings.ToUpper(name)
	if IsSecretName(name) || strings.Contains(upper, "PASSWORD") || strings.Contains(upper, "PASSWD") {
		return true
	}
	for _, s := range []string{"KEY", "TOKEN", "SECRET"} {
		if upper == s || strings.HasSuffix(upper, "_"+s) {
			return true
		}
	}
	return false
}

// CheckRunEnv checks a run's harness environment (KEY=VALUE entries, the
// starter's --harness-env): it travels in the run's workflow input, so it
// may hold no credential, and it may not replace the env contract's
// variables. The error names the entry's key, never its value.
func CheckRunEnv(env []string) error {
	seen := make(map[string]bool, len(env))
	for _, kv := range env {
		name, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok || name == "":
			return fmt.Errorf("harness env %q: want KEY=VALUE", name)
		case strings.ContainsAny(name, " \t\n\x00"):
			return fmt.Errorf("harness env %q: a variable name has no spaces", name)
		case IsCredentialName(name):
			return fmt.Errorf("harness env %s looks like a credential: a run's environment is stored in its workflow history, so credentials stay in the worker's environment (the harness gets the rollout's own key as OPENAI_API_KEY and ANTHROPIC_API_KEY)", name)
		case isContractName(name):
			return fmt.Errorf("harness env %s: set by evalflow for every harness (the env contract); it cannot be replaced", name)
		case seen[name]:
			return fmt.Errorf("harness env %s is given twice", name)
		}
		seen[name] = true
	}
	return nil
}

func isContractName(name string) bool {
	upper := strings.ToUpper(name)
	if strings.HasPrefix(upper, "EVALFLOW_") {
		return true
	}
	for _, c := range contractNames {
		if upper == c {
			return true
		}
	}
	return false
}
