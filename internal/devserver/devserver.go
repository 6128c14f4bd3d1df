// Package devserver runs an embedded Temporal server persisted to a SQLite file,
// with the Temporal Web UI, so evalflow works with nothing else installed.
//
// Ports: the frontend gRPC service listens on Config.Port and its HTTP API on
// Port+10 (7233 and 7243 by default, as with the Temporal CLI). The history,
// matching and worker services listen on free loopback-chosen ports picked at
// each start; nothing outside the process dials them. The Web UI listens on
// Config.UIPort (8233 by default).
package devserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/temporal"
)

// Defaults applied to zero Config fields.
const (
	DefaultDataDir   = ".evalflow"
	DefaultIP        = "127.0.0.1"
	DefaultPort      = 7233
	DefaultUIPort    = 8233
	DefaultNamespace = "default"
)

// httpPortOffset places the frontend HTTP API at Port+10, as the Temporal CLI does.
const httpPortOffset = 10

// ErrAlreadyRunning is returned by Start when another server holds the data
// directory's lock; the wrapping error names that server's address.
var ErrAlreadyRunning = errors.New("dev server already running")

// Config configures an embedded server. Zero fields take the defaults above.
type Config struct {
	// DataDir holds the SQLite file (temporal.db), the server log
	// (temporal.log) and the lock that keeps a second server out.
	DataDir string
	// IP is the address every service binds to.
	IP string
	// Port is the frontend gRPC port; the frontend HTTP API listens on Port+10.
	Port int
	// UIPort is the Web UI port; -1 disables the UI.
	UIPort int
	// Namespace is created on every start if it does not exist.
	Namespace string
	// SearchAttributes are custom search attributes registered in Namespace
	// when it is created.
	SearchAttributes map[string]enumspb.IndexedValueType
	// Logger receives start and stop messages. The Temporal server's own logs
	// go to DataDir/temporal.log at warn level.
	Logger *slog.Logger
	// TLS, when set, serves the frontend over TLS (tests of secure
	// connections; the starter's embedded server is plain).
	TLS *TLS
	// Authorizer and ClaimMapper replace the ones that admit every call
	// (tests of API keys and of refused operator calls).
	Authorizer  authorization.Authorizer
	ClaimMapper authorization.ClaimMapper
}

// TLS is the frontend's TLS: its certificate and key, signed by CAFile,
// which also signs the client certificates it accepts. The server's own
// system worker presents the server certificate as its client certificate,
// so it must allow client authentication too.
type TLS struct {
	CAFile, CertFile, KeyFile string
	// RequireClientCert turns on mTLS.
	RequireClientCert bool
	// ServerName is the name in the server certificate, for the server's
	// own clients.
	ServerName string
}

func (c Config) withDefaults() Config {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.IP == "" {
		c.IP = DefaultIP
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.UIPort == 0 {
		c.UIPort = DefaultUIPort
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// dialIP is the address clients use: the bind address, or loopback when
// binding to every interface.
func (c Config) dialIP() string {
	if ip := net.ParseIP(c.IP); ip != nil && ip.IsUnspecified() {
		return DefaultIP
	}
	return c.IP
}

// Server is a running embedded Temporal server and, optionally, its Web UI.
type Server struct {
	address string
	uiURL   string
	logger  *slog.Logger

	temporal temporal.Server
	ui       *uiServer
	logFile  io.Closer
	lock     *dirLock

	stopOnce sync.Once
	stopErr  error
}

// Start starts the server and returns once the frontend answers health checks,
// or fails when ctx ends first. Ports in use and a data directory held by
// another server are reported before anything starts.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	address := net.JoinHostPort(cfg.dialIP(), strconv.Itoa(cfg.Port))

	lock, err := lockDir(cfg.DataDir, address)
	if err != nil {
		return nil, err
	}
	s := &Server{address: address, logger: cfg.Logger, lock: lock}
	if err := s.start(ctx, cfg); err != nil {
		_ = s.Stop()
		return nil, err
	}
	s.logger.Info("temporal dev server started", "address", s.address, "ui", s.uiURL,
		"namespace", cfg.Namespace, "db", dbPath(cfg.DataDir))
	return s, nil
}

func (s *Server) start(ctx context.Context, cfg Config) error {
	ports, err := allocatePorts(cfg)
	if err != nil {
		return err
	}
	logger, logFile, err := openServerLog(filepath.Join(cfg.DataDir, "temporal.log"))
	if err != nil {
		return err
	}
	s.logFile = logFile

	srv, err := startTemporal(cfg, ports, logger)
	if err != nil {
		return err
	}
	s.temporal = srv

	if cfg.UIPort > 0 {
		ui, err := startUI(ctx, cfg, s.address)
		if err != nil {
			return err
		}
		s.ui = ui
		s.uiURL = "http://" + net.JoinHostPort(cfg.dialIP(), strconv.Itoa(cfg.UIPort))
	}
	return readyFrontend(ctx, cfg, s.address)
}

// ErrStartFailed is a Temporal server that failed as it started (a port
// taken before it bound it, most often): try again with other ports.
var ErrStartFailed = errors.New("the Temporal server failed to start")

// startTemporal builds and starts the server; a fatal error of the server
// while it starts is returned, wrapping ErrStartFailed.
func startTemporal(cfg Config, p ports, logger log.Logger) (srv temporal.Server, err error) {
	defer func() {
		if r := recover(); r != nil {
			srv, err = nil, fmt.Errorf("%w: %v (see %s)", ErrStartFailed, r, filepath.Join(cfg.DataDir, "temporal.log"))
		}
	}()
	srv, err = newTemporal(cfg, p, logger)
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start temporal server: %w", err)
	}
	return srv, nil
}

// startTries bounds the starts of StartOnFreePort.
const startTries = 5

// StartOnFreePort is Start with the frontend on a free port of cfg.IP
// (FreePort) in place of cfg.Port. Another program may take the port, or
// one picked for an internal service, between the pick and the server's
// bind, which fails the start (ErrStartFailed): it then starts again on
// other ports, startTries times in all. For tests and benchmarks, whose
// servers start beside others.
//
// A database the failed start created is removed before the next: its
// membership table names the failed attempt's services, which the next
// attempt's services would take for live peers.
func StartOnFreePort(ctx context.Context, cfg Config) (*Server, error) {
	ip := cfg.withDefaults().IP
	db := dbPath(cfg.withDefaults().DataDir)
	_, statErr := os.Stat(db)
	fresh := errors.Is(statErr, fs.ErrNotExist)
	var err error
	for range startTries {
		if cfg.Port, err = FreePort(ip); err != nil {
			return nil, fmt.Errorf("pick a free port on %s: %w", ip, err)
		}
		var srv *Server
		srv, err = Start(ctx, cfg)
		if !errors.Is(err, errAddrInUse) && !errors.Is(err, ErrStartFailed) {
			return srv, err
		}
		if fresh {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				_ = os.Remove(db + suffix)
			}
		}
	}
	return nil, err
}

// Address returns the frontend's host:port for SDK clients.
func (s *Server) Address() string { return s.address }

// UIURL returns the Web UI's base URL, or "" when the UI is disabled.
func (s *Server) UIURL() string { return s.uiURL }

// Stop stops the UI and the server and releases the data directory. It is
// safe to call more than once.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		var errs []error
		if s.ui != nil {
			s.ui.stop()
		}
		if s.temporal != nil {
			if err := s.temporal.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stop temporal server: %w", err))
			}
			s.logger.Info("temporal dev server stopped", "address", s.address)
		}
		if s.logFile != nil {
			if err := s.logFile.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close server log: %w", err))
			}
		}
		if err := s.lock.release(); err != nil {
			errs = append(errs, err)
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}
