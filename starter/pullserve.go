package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/pull/pullhttp"
	"github.com/evalflow/evalflow/results"
)

// defaultPullAddr is where the pull API listens: loopback unless told.
const defaultPullAddr = "127.0.0.1:8790"

// pullTokenFlag is the pull API's bearer token. It comes from the
// environment (a flag's value shows in the process list) and stays in this
// process.
var pullTokenFlag = &cli.StringFlag{
	Name: "pull-token", EnvVars: []string{"EVALFLOW_PULL_TOKEN"},
	Usage: "bearer token trainers send to the pull API (prefer the environment variable to the flag)",
}

var pullTimeoutFlag = &cli.DurationFlag{
	Name: "pull-call-timeout", Value: pullhttp.DefaultCallTimeout, EnvVars: []string{"EVALFLOW_PULL_CALL_TIMEOUT"},
	Usage: "longest a pull API call (run_group waits for its rollouts) holds its request before answering 504",
}

func pullServeCommand() *cli.Command {
	return &cli.Command{
		Name:  "pull-serve",
		Usage: "serve the pull API (sample, run_rollout, run_group, progress, close) over HTTP for trainers in any language",
		Description: "Serves every pull run (starter train --pull) of the namespace under /v1/pull/{run_id}/. " +
			"Requests carry Authorization: Bearer $EVALFLOW_PULL_TOKEN. Workers run the rollouts; this process only relays.",
		Flags: append(append(append(wiring.ClientFlags(), wiring.StoreFlags()...), wiring.LogFlags()...),
			&cli.StringFlag{Name: "addr", Value: defaultPullAddr, EnvVars: []string{"EVALFLOW_PULL_ADDR"},
				Usage: "address to listen on (loopback by default)"},
			pullTokenFlag, pullTimeoutFlag,
		),
		Before: takesArgs(0),
		Action: func(cctx *cli.Context) error {
			if err := needPullToken(cctx); err != nil {
				return err
			}
			s, err := connect(cctx, connectOptions{})
			if err != nil {
				return err
			}
			defer s.Close()
			srv, err := servePull(cctx, s.client, cctx.String("addr"), s.logger)
			if err != nil {
				return err
			}
			defer srv.stop()
			fmt.Fprintf(os.Stderr, "Pull API: %s/v1/pull/{run_id}/ (Temporal at %s). Ctrl-C stops.\n",
				srv.url, cctx.String(wiring.FlagAddress))
			<-cctx.Context.Done()
			return nil
		},
	}
}

// needPullToken refuses to serve the pull API without a token.
func needPullToken(cctx *cli.Context) error {
	if strings.TrimSpace(cctx.String(pullTokenFlag.Name)) == "" {
		return errors.New("the pull API needs a token: set EVALFLOW_PULL_TOKEN (trainers send it as Authorization: Bearer <token>)")
	}
	return nil
}

type pullServer struct {
	url  string
	stop func()
}

// servePull serves the pull API over c on addr; its answers carry the
// rollouts' traces, read from the run store --store/--runs-dir name.
func servePull(cctx *cli.Context, c client.Client, addr string, logger *slog.Logger) (pullServer, error) {
	store, err := openStore(cctx.Context, storeFlags(cctx))
	if err != nil {
		return pullServer{}, err
	}
	h, err := pullhttp.New(c, pullhttp.Config{
		Token:       cctx.String(pullTokenFlag.Name),
		CallTimeout: cctx.Duration(pullTimeoutFlag.Name),
		Logger:      logger,
		Traces:      results.TraceJSON{Store: store},
	})
	if err != nil {
		_ = store.Close()
		return pullServer{}, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		_ = store.Close()
		return pullServer{}, fmt.Errorf("pull API: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "pull API:", err)
		}
	}()
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return pullServer{
		url: "http://" + net.JoinHostPort(host, port),
		stop: func() {
			// Calls in flight are cut: their callers see the connection
			// close, and the rollouts they started are stored all the same.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if srv.Shutdown(ctx) != nil {
				_ = srv.Close()
			}
			_ = store.Close()
		},
	}, nil
}
