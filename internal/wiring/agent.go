package wiring

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/evalflow/evalflow/internal/harness/agent"
)

// AgentProgram is the lean built-in agent program (cmd/evalflow-agent).
const AgentProgram = "evalflow-agent"

// AgentEnv names the built-in agent program to run, overriding the search.
const AgentEnv = "EVALFLOW_AGENT"

// builtinAgent is the command rollouts run when a run names no harness: the
// lean evalflow-agent program when one is found — $EVALFLOW_AGENT, next to
// this executable, or on PATH — and else this executable's hidden agent
// command. Both are the same agent, but a binary that links the Temporal
// server pays its package initialisation (about 150 ms of CPU and 150 MB
// of memory) in every rollout, which hundreds of rollouts in flight cannot
// afford on a small machine; lean says which was found.
func builtinAgent() (command []string, lean bool, err error) {
	if p := os.Getenv(AgentEnv); p != "" {
		abs, err := exec.LookPath(p)
		if err != nil {
			return nil, false, fmt.Errorf("%s=%s: %w", AgentEnv, p, err)
		}
		return []string{abs}, true, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, false, fmt.Errorf("find own executable for the built-in agent: %w", err)
	}
	beside := filepath.Join(filepath.Dir(exe), AgentProgram)
	if fi, err := os.Stat(beside); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return []string{beside}, true, nil
	}
	if p, err := exec.LookPath(AgentProgram); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return []string{abs}, true, nil
		}
	}
	return []string{exe, agent.Subcommand}, false, nil
}
