// Command starter starts and watches evalflow runs: `starter eval` runs an
// evaluation (on an embedded Temporal server when no --address is given), `status`
// and `results` report on a run, `dev` runs the embedded server and a worker.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/internal/harness/agent"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/tunnel"
)

func main() {
	// An frp tunnel runs its client as a child process of this binary.
	tunnel.ServeFRPClientIfAsked()
	// The built-in agent is this binary's hidden "agent" command: rollouts run
	// it as a subprocess.
	agent.ServeIfAsked()
	os.Exit(execute())
}

// execute runs the command line and returns the exit code. (It is not
// run(): that is the package run the commands use.)
func execute() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newApp().RunContext(ctx, os.Args); err != nil {
		var ec exitCode
		if errors.As(err, &ec) {
			return int(ec)
		}
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	return 0
}

// newApp is the starter's command line.
func newApp() *cli.App {
	return &cli.App{
		Name:    "starter",
		Usage:   "run LLM agent evaluations as durable Temporal workflows",
		Version: wiring.Version(),
		Commands: []*cli.Command{
			evalCommand(),
			auditCommand(),
			imagesCommand(),
			trainCommand(),
			resumeCommand(),
			statusCommand(),
			resultsCommand(),
			exportCommand(),
			devCommand(),
			setupCommand(),
			viewCommand(),
			pullServeCommand(),
		},
	}
}

// exitCode ends the program with a code after the command printed its own message.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }
