package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/internal/wiring"
)

func devCommand() *cli.Command {
	return &cli.Command{
		Name:  "dev",
		Usage: "run the embedded Temporal server, its Web UI and a worker in the foreground",
		Flags: append([]cli.Flag{
			dataDirFlag, uiPortFlag, viewerAddrFlag,
			&cli.BoolFlag{Name: "worker", Value: true, Usage: "also run a worker in this process"},
		}, wiring.WorkerFlags()...),
		Before: takesArgs(0),
		Action: func(cctx *cli.Context) error {
			worker := "off"
			if cctx.Bool("worker") {
				worker = "on"
			}
			s, err := connect(cctx, connectOptions{embed: true, serve: true, worker: worker})
			if err != nil {
				return err
			}
			defer s.Close()
			if !s.Embedded() {
				return fmt.Errorf("a Temporal server already answers at %s; use it, or pick another --address", cctx.String(wiring.FlagAddress))
			}
			fmt.Fprintf(os.Stderr, "Temporal frontend: %s\n", s.server.Address())
			if s.uiURL != "" {
				fmt.Fprintf(os.Stderr, "Temporal Web UI:   %s\n", s.uiURL)
			}
			if s.worker != nil {
				fmt.Fprintf(os.Stderr, "Worker polling task queue %q", cctx.String(wiring.FlagTaskQueue))
				if s.worker.UsingMock {
					fmt.Fprint(os.Stderr, " (offline mock model)")
				}
				fmt.Fprintln(os.Stderr)
			}
			defer startViewer(cctx, s.uiURL)()
			fmt.Fprintln(os.Stderr, "Ctrl-C stops.")
			<-cctx.Context.Done()
			return nil
		},
	}
}
