package agent

import (
	"context"
	"os"

	"github.com/evalflow/evalflow/internal/harness/container/keeper"
)

// Subcommand is the argument under which evalflow binaries run the
// built-in agent: rollouts start `<binary> agent [flags]` as their harness.
const Subcommand = "agent"

// ServeIfAsked runs the built-in agent and exits when the program was
// started as `<binary> agent …`, and likewise a sandbox's keeper for
// `<binary> sandbox …` (a bubblewrap sandbox's forwarder runs the binary
// that found no lean agent beside it); otherwise it returns at once.
// Binaries call it first thing in main.
func ServeIfAsked() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case Subcommand:
		os.Exit(Main(context.Background(), os.Args[2:], os.Stdout, os.Stderr))
	case keeper.Command:
		os.Exit(keeper.Main(os.Args[2:], os.Stdout, os.Stderr))
	}
}
