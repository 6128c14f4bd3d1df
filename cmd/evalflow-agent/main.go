// Command evalflow-agent is the built-in harness as a program of its own:
// the reference agent for harness authors, and a small binary to run
// rollouts with where the worker binary is too heavy to start many times.
// `starter` and `worker` run the same agent as their hidden `agent` command.
//
// Built static (CGO_ENABLED=0), it is also what the container runtime
// mounts into every sandbox: the agent, and `evalflow-agent sandbox keep`,
// the process that keeps the sandbox (harness/container/keeper).
package main

import (
	"context"
	"os"

	"github.com/evalflow/evalflow/internal/harness/agent"
	"github.com/evalflow/evalflow/internal/harness/container/keeper"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == keeper.Command {
		os.Exit(keeper.Main(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(agent.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
