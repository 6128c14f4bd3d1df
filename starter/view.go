package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/internal/viewer"
	"github.com/evalflow/evalflow/internal/wiring"
)

// defaultViewerAddr is where the run viewer listens: loopback only.
const defaultViewerAddr = "127.0.0.1:8234"

// viewerAddrFlag serves the run viewer from a command that runs or hosts
// runs (eval, train, dev).
var viewerAddrFlag = &cli.StringFlag{
	Name: "viewer-addr", Value: defaultViewerAddr, EnvVars: []string{"EVALFLOW_VIEWER_ADDR"},
	Usage: "address of the run viewer (transcripts, rewards, failures) served while this runs; empty or -1 disables it",
}

func viewCommand() *cli.Command {
	return &cli.Command{
		Name:  "view",
		Usage: "serve the run viewer: every run in the store, its figures, rollouts and transcripts, in the browser",
		Flags: append(append(wiring.StoreFlags(), wiring.ClientFlags()...),
			&cli.StringFlag{Name: "addr", Value: defaultViewerAddr, EnvVars: []string{"EVALFLOW_VIEWER_ADDR"},
				Usage: "address to listen on (loopback by default; the viewer has no login)"},
			&cli.StringFlag{Name: "ui-url", Value: "http://127.0.0.1:8233", EnvVars: []string{"EVALFLOW_UI_URL"},
				Usage: "Temporal Web UI a rollout links to (empty: no link)"},
		),
		Before: takesArgs(0),
		Action: func(cctx *cli.Context) error {
			srv, err := serveViewer(cctx.Context, storeFlags(cctx), cctx.String("addr"), viewerOptions(cctx, cctx.String("ui-url")))
			if err != nil {
				return err
			}
			defer srv.stop()
			fmt.Fprintf(os.Stderr, "Run viewer: %s (runs in %s). Ctrl-C stops.\n", srv.url, storeFlags(cctx))
			<-cctx.Context.Done()
			return nil
		},
	}
}

// startViewer serves the viewer on --viewer-addr beside a run, and prints its
// URL. A viewer that cannot start (its port taken, say by another run's) is
// reported and skipped: the run goes on without it.
func startViewer(cctx *cli.Context, uiURL string) func() {
	addr := strings.TrimSpace(cctx.String(viewerAddrFlag.Name))
	if addr == "" || addr == "-1" {
		return func() {}
	}
	srv, err := serveViewer(cctx.Context, storeFlags(cctx), addr, viewerOptions(cctx, uiURL))
	if err != nil {
		fmt.Fprintf(os.Stderr, "Run viewer not started: %v (--viewer-addr picks another address)\n", err)
		return func() {}
	}
	fmt.Fprintf(os.Stderr, "Run viewer: %s\n", srv.url)
	return srv.stop
}

// secretEnv names the environment variables whose values the viewer never
// serves: API keys, tokens, passwords.
var secretEnv = regexp.MustCompile(`(?i)(api_?key|token|secret|password)`)

func viewerOptions(cctx *cli.Context, uiURL string) viewer.Options {
	opts := viewer.Options{TemporalUI: uiURL, Namespace: cctx.String(wiring.FlagNamespace)}
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		if secretEnv.MatchString(name) && len(value) >= 8 {
			opts.Secrets = append(opts.Secrets, value)
		}
	}
	return opts
}

type viewerServer struct {
	url  string
	stop func()
}

// serveViewer serves the viewer of the store sc names on addr.
func serveViewer(ctx context.Context, sc wiring.StoreConfig, addr string, opts viewer.Options) (viewerServer, error) {
	store, err := openStore(ctx, sc)
	if err != nil {
		return viewerServer{}, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		_ = store.Close()
		return viewerServer{}, fmt.Errorf("run viewer: %w", err)
	}
	srv := &http.Server{Handler: viewer.New(store, opts), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "run viewer:", err)
		}
	}()
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return viewerServer{
		url: "http://" + net.JoinHostPort(host, port) + "/",
		stop: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx)
			_ = store.Close()
		},
	}, nil
}
