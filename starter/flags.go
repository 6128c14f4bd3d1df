package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/internal/wiring"
)

// The starter's own flags; the worker's come from wiring.WorkerFlags.
var (
	dataDirFlag = &cli.StringFlag{
		Name: "data-dir", Value: ".evalflow", EnvVars: []string{"EVALFLOW_DATA_DIR"},
		Usage: "where the embedded Temporal server keeps its SQLite file, and this process its log (evalflow.log)",
	}
	uiPortFlag = &cli.IntFlag{
		Name: "ui-port", Value: 8233, EnvVars: []string{"EVALFLOW_UI_PORT"},
		Usage: "port of the embedded Temporal Web UI (-1 disables it)",
	}
	embeddedFlag = &cli.BoolFlag{
		Name: "embedded", EnvVars: []string{"EVALFLOW_EMBEDDED"},
		Usage: "when nothing answers at --address, start the embedded Temporal server there (the default only when no --address is given)",
	}
	uiURLFlag = &cli.StringFlag{
		Name: "ui-url", EnvVars: []string{"EVALFLOW_UI_URL"},
		Usage: "Temporal Web UI of the cluster at --address (e.g. http://temporal-ui:8080): the run's link is printed with it; the embedded server's own UI needs none",
	}
)

// readerFlags are the flags of the commands that only read a run: where the
// run is, in Temporal and in the store, and the log.
func readerFlags() []cli.Flag {
	return append(append(wiring.ClientFlags(), wiring.StoreFlags()...), wiring.LogFlags()...)
}

// takesArgs refuses arguments beyond the n positional ones (0 or 1: a run
// id) a command takes. urfave/cli stops reading flags at the first positional
// argument, so a flag after it would otherwise be silently ignored.
func takesArgs(n int) cli.BeforeFunc {
	return func(cctx *cli.Context) error {
		args := cctx.Args().Slice()
		if len(args) <= n {
			return nil
		}
		name := cctx.Command.Name
		if n == 0 {
			return fmt.Errorf("unexpected argument %q: %s takes flags only, and reads none after an argument", args[0], name)
		}
		for _, a := range args[n:] {
			if strings.HasPrefix(a, "-") {
				return fmt.Errorf("%s after the run id was not read: put flags before the run id (starter %s [flags] <run-id>)", a, name)
			}
		}
		return fmt.Errorf("unexpected argument %q: %s takes one run id", args[n], name)
	}
}
