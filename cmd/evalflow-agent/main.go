// Command evalflow-agent is the built-in harness as a program of its own:
// the reference agent for harness authors, and a small binary to run
// rollouts with where the worker binary is too heavy to start many times.
// `starter` and `worker` run the same agent as their hidden `agent` command.
package main

import (
	"context"
	"os"

	"github.com/evalflow/evalflow/harness/agent"
)

func main() {
	os.Exit(agent.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
