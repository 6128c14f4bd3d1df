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
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/devserver"
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
	// embed allows starting an embedded server when nothing answers.
	embed bool
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
// answers at a local address and the command allows it. A process that may
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
	address, ns := cctx.String(wiring.FlagAddress), cctx.String(wiring.FlagNamespace)
	c, err := wiring.Dial(ctx, address, ns, s.logger, 2*time.Second)
	if err != nil {
		if !opts.embed || !isLocal(address) {
			s.Close()
			return nil, fmt.Errorf("no Temporal server answers at %s (start one with `starter dev`, or point --address at your cluster): %w", address, err)
		}
		if c, err = s.startEmbedded(cctx, address); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.client = c
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
		DataDir:   cctx.String(dataDirFlag.Name),
		Port:      port,
		UIPort:    cctx.Int(uiPortFlag.Name),
		Namespace: cctx.String(wiring.FlagNamespace),
		SearchAttributes: map[string]enumspb.IndexedValueType{
			workflows.AttrRunID:   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
			workflows.AttrModel:   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
			workflows.AttrTaskset: enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		},
		Logger: s.logger,
	})
	if errors.Is(err, devserver.ErrAlreadyRunning) {
		// Another evalflow process owns the data dir and is still starting.
		return wiring.Dial(cctx.Context, address, cctx.String(wiring.FlagNamespace), s.logger, 30*time.Second)
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
