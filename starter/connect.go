package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/devserver"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/wiring"
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
}

// connectOptions say what a command needs besides a client.
type connectOptions struct {
	// embed allows starting an embedded server when nothing answers.
	embed bool
	// worker runs an in-process worker: "auto" runs one only with an embedded server.
	worker string
}

// connectForRun connects as the commands that start or resume a run do:
// with an embedded server and an in-process worker when nothing answers,
// saying so when that worker falls back to the offline mock model.
func connectForRun(cctx *cli.Context) (*session, error) {
	s, err := connect(cctx, connectOptions{embed: true, worker: cctx.String("worker")})
	if err != nil {
		return nil, err
	}
	if s.worker != nil && s.worker.UsingMock {
		fmt.Fprintln(os.Stderr, "No provider configured (--base-url / OPENAI_BASE_URL): using the offline mock model.")
	}
	return s, nil
}

// connect dials --address, or starts an embedded server there when nothing
// answers at a local address and the command allows it.
func connect(cctx *cli.Context, opts connectOptions) (*session, error) {
	ctx := cctx.Context
	logger := quietLogger()
	address, ns := cctx.String(addressFlag.Name), cctx.String(namespaceFlag.Name)
	s := &session{logger: logger}
	c, err := wiring.Dial(ctx, address, ns, logger, 2*time.Second)
	if err != nil {
		if !opts.embed || !isLocal(address) {
			return nil, fmt.Errorf("no Temporal server answers at %s (start one with `starter dev`, or point --address at your cluster): %w", address, err)
		}
		if c, err = s.startEmbedded(cctx, address); err != nil {
			return nil, err
		}
	}
	s.client = c
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
		Namespace: cctx.String(namespaceFlag.Name),
		SearchAttributes: map[string]enumspb.IndexedValueType{
			workflows.AttrRunID:   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
			workflows.AttrModel:   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
			workflows.AttrTaskset: enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		},
		Logger: s.logger,
	})
	if errors.Is(err, devserver.ErrAlreadyRunning) {
		// Another evalflow process owns the data dir and is still starting.
		return wiring.Dial(cctx.Context, address, cctx.String(namespaceFlag.Name), s.logger, 30*time.Second)
	}
	if err != nil {
		return nil, err
	}
	s.server = srv
	s.uiURL = srv.UIURL()
	c, err := wiring.Dial(cctx.Context, srv.Address(), cctx.String(namespaceFlag.Name), s.logger, 30*time.Second)
	if err != nil {
		_ = srv.Stop()
		s.server = nil
		return nil, err
	}
	return c, nil
}

func (s *session) startWorker(cctx *cli.Context) error {
	ic, err := wiring.InterceptionFromFlags(cctx)
	if err != nil {
		return err
	}
	rt, closeRuntime, err := wiring.RuntimeFromFlags(cctx, "")
	if err != nil {
		return err
	}
	s.closeRuntime = closeRuntime
	w, err := wiring.NewWorker(s.client, wiring.Config{
		Runtime:         rt,
		Interception:    ic,
		TaskQueue:       cctx.String(taskQueueFlag.Name),
		RunsDir:         cctx.String(runsDirFlag.Name),
		BaseURL:         cctx.String(baseURLFlag.Name),
		APIKeyEnv:       cctx.String(apiKeyEnvFlag.Name),
		UpstreamDialect: cctx.String(upstreamDialectFlag.Name),
		MaxRollouts:     cctx.Int(maxRolloutsFlag.Name),
		Multiplex:       cctx.Int(multiplexFlag.Name),
		Mock: mock.Config{
			Latency:   cctx.Duration(mockLatencyFlag.Name),
			ErrorRate: cctx.Float64(mockErrorRateFlag.Name),
		},
		Logger: s.logger,
	})
	if err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return err
	}
	s.worker = w
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
