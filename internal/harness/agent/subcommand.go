package agent

import (
	"context"
	"os"
)

// Subcommand is the argument under which evalflow binaries run the
// built-in agent: rollouts start `<binary> agent [flags]` as their harness.
const Subcommand = "agent"

// ServeIfAsked runs the built-in agent and exits when the program was
// started as `<binary> agent …`; otherwise it returns at once. Binaries call
// it first thing in main.
func ServeIfAsked() {
	if len(os.Args) > 1 && os.Args[1] == Subcommand {
		os.Exit(Main(context.Background(), os.Args[2:], os.Stdout, os.Stderr))
	}
}
