package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/devserver"
	"github.com/evalflow/evalflow/internal/namespace"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/workflows"
)

// session is a connection to Temporal, with the embedded server and the
// in-process worker when this process runs them.
type session struct {
	client client.Client
	server *devserver.Server
	worker *wiring.Worker
	// closeRuntime removes what the harness runtime set up (a namespace).
	closeRuntime func() error
	uiURL        string
	logger       *slog.Logger
	// logFile holds the log of the embedded server and the in-process
	// worker, when this process runs them.
	logFile io.Closer
}

// Embedded reports whether this process runs the Temporal server.
func (s *session) Embedded() bool { return s.server != nil }

// Close stops the worker, the client and the embedded server, in that order.
func (s *session) Close() {
	if s.worker != nil {
		s.worker.Stop()
	}
	if s.closeRuntime != nil {
		if err := s.closeRuntime(); err != nil {
			s.logger.Warn("close harness runtime", "error", err)
		}
	}
	if s.client != nil {
		s.client.Close()
	}
	if s.server != nil {
		if err := s.server.Stop(); err != nil {
			s.logger.Warn("stop embedded temporal", "error", err)
		}
	}
	if s.logFile != nil {
		_ = s.logFile.Close()
	}
}

// connectOptions say what a command needs besides a client.
type connectOptions struct {
	// embed allows starting an embedded server when nothing answers: at the
	// default address when the user gave none, or where --embedded says.
	// An address the user gave must answer otherwise.
	embed bool
	// serve starts the embedded server wherever --address says (`starter
	// dev`, whose purpose it is).
	serve bool
	// worker runs an in-process worker: "auto" runs one only with an embedded server.
	worker string
}

// connectForRun connects as the commands that start or resume a run do:
// with an embedded server and an in-process worker when nothing answers.
// When that worker falls back to the offline mock model, a new run's model
// (cfg, nil for a resume) becomes the mock's, and a notice says so.
func connectForRun(cctx *cli.Context, cfg *workflows.RunConfig) (*session, error) {
	s, err := connect(cctx, connectOptions{embed: true, worker: cctx.String("worker")})
	if err != nil {
		return nil, err
	}
	if s.usingMock() && cfg != nil {
		fmt.Fprintln(os.Stderr, useMock(cfg))
	}
	return s, nil
}

// usingMock reports whether this process's worker answers with the offline
// mock model: no provider is configured.
func (s *session) usingMock() bool { return s.worker != nil && s.worker.UsingMock }

// mockModel is the model name of the offline mock.
const mockModel = "mock"

// useMock makes a run record the model that answers it: the in-process
// worker has no provider, so the mock answers whatever --model says. It
// returns the notice to print.
func useMock(cfg *workflows.RunConfig) string {
	if cfg.Model == mockModel {
		return "No provider configured (--base-url / OPENAI_BASE_URL): using the offline mock model."
	}
	notice := fmt.Sprintf("--model %s was ignored because no provider is configured (--base-url / OPENAI_BASE_URL): the run uses the offline mock model, and records it as %q.", cfg.Model, mockModel)
	cfg.Model = mockModel
	return notice
}

// connect dials --address, or starts an embedded server there when nothing
// answers, the command allows it and the user did not name a cluster (no
// --address, or --embedded). A process that may
// run the server or a worker logs to <data-dir>/evalflow.log, so that no log
// line lands in the progress bar; others log to stderr.
func connect(cctx *cli.Context, opts connectOptions) (*session, error) {
	ctx := cctx.Context
	s := &session{}
	if opts.embed || opts.worker == "on" {
		logger, f, path, err := openLog(cctx)
		if err != nil {
			return nil, err
		}
		s.logger, s.logFile = logger, f
		fmt.Fprintf(os.Stderr, "Logs: %s\n", path)
	} else {
		h, err := wiring.NewLogHandler(cctx, os.Stderr)
		if err != nil {
			return nil, err
		}
		s.logger = slog.New(shutdownFilter{h})
	}
	conn := wiring.ConnectionFromFlags(cctx)
	address := conn.Address
	c, err := wiring.DialConnection(ctx, conn, s.logger, 2*time.Second)
	if err != nil {
		if !opts.embed || !(opts.serve || mayEmbed(cctx)) {
			s.Close()
			return nil, unreachable(cctx, conn, opts.embed, err)
		}
		if conn.Secure() {
			s.Close()
			return nil, fmt.Errorf("--embedded with --tls, --tls-* or --api-key: the embedded server speaks plain gRPC on loopback; drop those flags, or start your cluster at %s", address)
		}
		if !isLocal(address) {
			s.Close()
			return nil, fmt.Errorf("--embedded at %s: the embedded server listens on a loopback address only (e.g. localhost:7233)", address)
		}
		if c, err = s.startEmbedded(cctx, address); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.client = c
	if !s.Embedded() {
		// A cluster's namespace is made once, by `starter setup`.
		if err := wiring.CheckNamespace(ctx, c, conn); err != nil {
			s.Close()
			return nil, err
		}
	}
	if u := cctx.String(uiURLFlag.Name); u != "" {
		// The cluster's own UI, or one the user prefers to the embedded one.
		s.uiURL = u
	}
	if opts.worker == "on" || (opts.worker == "auto" && s.Embedded()) {
		if err := s.startWorker(cctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

func (s *session) startEmbedded(cctx *cli.Context, address string) (client.Client, error) {
	_, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("--address %q: %w", address, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("--address %q: bad port", address)
	}
	ctx, cancel := context.WithTimeout(cctx.Context, time.Minute)
	defer cancel()
	fmt.Fprintf(os.Stderr, "No Temporal server at %s: starting an embedded one (data in %s/)…\n", address, cctx.String(dataDirFlag.Name))
	srv, err := devserver.Start(ctx, devserver.Config{
		DataDir:          cctx.String(dataDirFlag.Name),
		Port:             port,
		UIPort:           cctx.Int(uiPortFlag.Name),
		Namespace:        cctx.String(wiring.FlagNamespace),
		SearchAttributes: namespace.Attributes(),
		Logger:           s.logger,
	})
	if errors.Is(err, devserver.ErrAlreadyRunning) {
		// Another evalflow process owns the data dir and is still starting.
		return wiring.DialConnection(cctx.Context, wiring.ConnectionFromFlags(cctx), s.logger, 30*time.Second)
	}
	if err != nil {
		return nil, err
	}
	s.server = srv
	s.uiURL = srv.UIURL()
	c, err := wiring.Dial(cctx.Context, srv.Address(), cctx.String(wiring.FlagNamespace), s.logger, 30*time.Second)
	if err != nil {
		_ = srv.Stop()
		s.server = nil
		return nil, err
	}
	return c, nil
}

func (s *session) startWorker(cctx *cli.Context) error {
	cfg, closeRuntime, err := wiring.ConfigFromFlags(cctx)
	if err != nil {
		return err
	}
	s.closeRuntime = closeRuntime
	cfg.Logger = s.logger
	w, err := wiring.NewWorker(s.client, cfg)
	if err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return err
	}
	s.worker = w
	if addr := w.MetricsAddr(); addr != "" {
		fmt.Fprintf(os.Stderr, "Metrics: http://%s/metrics\n", addr)
	}
	return nil
}

// mayEmbed reports whether the user left the choice of server to the
// starter: no --address (nor its environment variables), or --embedded.
func mayEmbed(cctx *cli.Context) bool {
	return !cctx.IsSet(wiring.FlagAddress) || cctx.Bool(embeddedFlag.Name)
}

// unreachable is the error for a Temporal server that did not answer at the
// address the user gave: named, with what to do.
func unreachable(cctx *cli.Context, conn wiring.Connection, embed bool, err error) error {
	hint := "start one with `starter dev`, or point --address at your cluster"
	if embed {
		hint = fmt.Sprintf("check that the cluster is up, point --address at it, or add --embedded to start an embedded server at %s", conn.Address)
	}
	return fmt.Errorf("no Temporal server answers at %s (%s): %w", conn, hint, err)
}

func isLocal(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
