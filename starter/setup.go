package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/internal/namespace"
	"github.com/evalflow/evalflow/internal/wiring"
)

// setupCommand makes a cluster's namespace ready for evalflow: the
// namespace, and the search attributes runs are listed and found by.
func setupCommand() *cli.Command {
	return &cli.Command{
		Name:  "setup",
		Usage: "create the Temporal namespace and evalflow's search attributes on a cluster, or print what an operator must run (safe to repeat)",
		Flags: append(append(wiring.ClientFlags(), wiring.LogFlags()...),
			&cli.DurationFlag{Name: "retention", Value: namespace.DefaultRetention,
				Usage: "how long a namespace setup creates keeps closed runs' histories (an existing namespace is left as it is)"},
		),
		Before: takesArgs(0),
		Action: func(cctx *cli.Context) error {
			h, err := wiring.NewLogHandler(cctx, os.Stderr)
			if err != nil {
				return err
			}
			conn := wiring.ConnectionFromFlags(cctx)
			c, err := wiring.DialConnection(cctx.Context, conn, slog.New(shutdownFilter{h}), 10*time.Second)
			if err != nil {
				return err
			}
			defer c.Close()
			want := namespace.Evalflow(conn.Namespace)
			want.Retention = cctx.Duration("retention")
			steps, err := namespace.Ensure(cctx.Context, namespace.Services{Workflow: c.WorkflowService(), Operator: c.OperatorService()}, want)
			var denied *namespace.DeniedError
			if errors.As(err, &denied) {
				fmt.Fprintf(cctx.App.ErrWriter, "The cluster at %s does not let this caller create %s (%v).\nAn operator can run, with the temporal CLI:\n", conn, joinAnd(denied.Missing), denied.Err)
				for _, cmd := range denied.Commands {
					fmt.Fprintln(cctx.App.ErrWriter, "  "+cmd)
				}
				fmt.Fprintln(cctx.App.ErrWriter, "(On Temporal Cloud, create the namespace and the Keyword search attributes in its web console or with tcld.)")
				return exitCode(2)
			}
			if err != nil {
				return err
			}
			for _, s := range steps {
				mark := "ok  "
				if s.Done {
					mark = "done"
				}
				fmt.Fprintf(cctx.App.Writer, "%s  %s\n", mark, s.What)
			}
			fmt.Fprintf(cctx.App.Writer, "Namespace %q at %s is ready for evalflow.\n", conn.Namespace, conn)
			return nil
		},
	}
}

func joinAnd(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	out := items[0]
	for _, it := range items[1 : len(items)-1] {
		out += ", " + it
	}
	return out + " and " + items[len(items)-1]
}
