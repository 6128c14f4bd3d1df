// Package temporalcluster runs the real Temporal server as an operator
// does: built from the module evalflow pins, each service (frontend,
// history, matching, worker) a process of its own, on PostgreSQL for
// persistence and visibility, configured by deploy/temporal/config.yaml —
// the file users copy. Tests start one, kill and restart its processes, and
// run evalflow's binaries against it.
package temporalcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/devserver"
	"github.com/evalflow/evalflow/internal/wiring"
)

// Services are the server's services, in the order they start.
var Services = []string{"history", "matching", "frontend", "worker"}

// TLS turns on TLS at the frontend.
type TLS struct {
	// CAFile signs the frontend's certificate and the client certificates
	// it accepts.
	CAFile, CertFile, KeyFile string
	// ServerName is a name in the frontend's certificate.
	ServerName string
	// RequireClientCert turns on mTLS.
	RequireClientCert bool
}

// Options configure a cluster.
type Options struct {
	// PostgresURL reaches a PostgreSQL server as a role that may create
	// databases; the cluster gets two fresh ones.
	PostgresURL string
	// Dir holds the configuration's logs; a test's temp dir.
	Dir string
	// Shards is the number of history shards (default 16).
	Shards int
	TLS    *TLS
	// BindIP is where the services listen (default 127.0.0.1); 0.0.0.0
	// lets workers in network namespaces reach the frontend at the host's
	// veth addresses. The services find each other at loopback.
	BindIP string
}

// Cluster is a running multi-process Temporal server.
type Cluster struct {
	// Address is the frontend's host:port.
	Address string
	opts    Options
	server  string
	env     []string

	// databases are the cluster's own, dropped by Stop.
	databases []string

	mu    sync.Mutex
	procs map[string]*exec.Cmd
	done  map[string]chan struct{}
}

// Binaries builds temporal-server and temporal-sql-tool from the module
// evalflow pins into a cache directory, once per version (a build that is
// up to date is a no-op), and returns their paths.
func Binaries(ctx context.Context) (server, sqlTool string, err error) {
	// A cold build on a busy machine takes minutes: it is not bounded by
	// the wait for a cluster that called it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Minute)
	defer cancel()
	version, err := moduleField(ctx, "{{.Version}}")
	if err != nil {
		return "", "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "evalflow", "temporal-"+version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", "", err
	}
	server, sqlTool = filepath.Join(dir, "temporal-server"), filepath.Join(dir, "temporal-sql-tool")
	for out, pkg := range map[string]string{server: "go.temporal.io/server/cmd/server", sqlTool: "go.temporal.io/server/cmd/tools/sql"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("go build %s: %w: %s", pkg, err, b)
		}
	}
	return server, sqlTool, nil
}

func moduleField(ctx context.Context, format string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", format, "go.temporal.io/server").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m go.temporal.io/server: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// ConfigFile is deploy/temporal/config.yaml of this checkout.
func ConfigFile() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "deploy", "temporal", "config.yaml"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Start creates the cluster's databases and schemas, and starts every
// service; it returns once the frontend answers.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Shards == 0 {
		opts.Shards = 16
	}
	if opts.BindIP == "" {
		opts.BindIP = "127.0.0.1"
	}
	server, sqlTool, err := Binaries(ctx)
	if err != nil {
		return nil, err
	}
	config, err := ConfigFile()
	if err != nil {
		return nil, err
	}
	schemaRoot, err := moduleField(ctx, "{{.Dir}}")
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(opts.PostgresURL)
	if err != nil {
		return nil, fmt.Errorf("postgres url: %w", err)
	}
	password, _ := u.User.Password()
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "5432"
	}
	pg := postgres{adminURL: opts.PostgresURL, host: host, port: port, user: u.User.Username(), password: password,
		sqlTool: sqlTool, schemaRoot: schemaRoot}

	// Each attempt has databases of its own: the services of a failed one
	// left their addresses in its membership table, and a service joining
	// the ring would first wait out those dead members.
	var failures []error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		db, vis, err := pg.create(ctx)
		if err != nil {
			return nil, err
		}
		c, err := startProcesses(ctx, opts, server, config, pg, db, vis)
		if err == nil {
			c.databases = []string{db, vis}
			return c, nil
		}
		dropDatabases(opts.PostgresURL, db, vis)
		failures = append(failures, fmt.Errorf("attempt %d: %w", attempt, err))
		if !errors.Is(err, errExited) {
			break
		}
	}
	return nil, errors.Join(failures...)
}

// startAttempts bounds the starts of a cluster whose service process
// exits: a port picked for it taken before it bound it.
const startAttempts = 3

// postgres is the server a cluster keeps its databases on.
type postgres struct {
	adminURL, host, port, user, password string
	sqlTool, schemaRoot                  string
}

// create creates a fresh pair of databases, persistence and visibility,
// with Temporal's schemas.
func (pg postgres) create(ctx context.Context) (db, vis string, err error) {
	suffix := randomHex(4)
	db, vis = "temporal_"+suffix, "temporal_visibility_"+suffix
	if err := createDatabases(ctx, pg.adminURL, db, vis); err != nil {
		return "", "", err
	}
	for _, s := range []struct{ name, dir string }{
		{db, "temporal"}, {vis, "visibility"},
	} {
		base := []string{"--plugin", "postgres12", "--ep", pg.host, "-p", pg.port, "-u", pg.user, "--pw", pg.password, "--db", s.name}
		for _, step := range [][]string{
			{"setup-schema", "-v", "0.0"},
			{"update-schema", "-d", filepath.Join(pg.schemaRoot, "schema", "postgresql", "v12", s.dir, "versioned")},
		} {
			cmd := exec.CommandContext(ctx, pg.sqlTool, append(append([]string{}, base...), step...)...)
			if out, err := cmd.CombinedOutput(); err != nil {
				dropDatabases(pg.adminURL, db, vis)
				return "", "", fmt.Errorf("temporal-sql-tool %s on %s: %w: %s", step[0], s.name, err, redact(out, pg.password))
			}
		}
	}
	return db, vis, nil
}

// errExited is a service process that ended on its own: a port picked for
// it was taken before it bound it, or its configuration is wrong (its log
// says which).
var errExited = errors.New("a Temporal service process exited")

func startProcesses(ctx context.Context, opts Options, server, config string, pg postgres, db, vis string) (*Cluster, error) {
	ports := map[string]int{}
	for _, name := range []string{"FRONTEND", "FRONTEND_HTTP", "HISTORY", "MATCHING", "WORKER",
		"FRONTEND_MEMBERSHIP", "HISTORY_MEMBERSHIP", "MATCHING_MEMBERSHIP", "WORKER_MEMBERSHIP"} {
		p, err := devserver.FreePort("127.0.0.1")
		if err != nil {
			return nil, err
		}
		ports[name] = p
	}
	env := append(os.Environ(),
		"TEMPORAL_DB_HOST="+pg.host, "TEMPORAL_DB_PORT="+pg.port, "TEMPORAL_DB_USER="+pg.user,
		"TEMPORAL_DB_PASSWORD="+pg.password, "TEMPORAL_DB="+db, "TEMPORAL_VISIBILITY_DB="+vis,
		"TEMPORAL_HISTORY_SHARDS="+strconv.Itoa(opts.Shards), "TEMPORAL_BIND_IP="+opts.BindIP, "TEMPORAL_BROADCAST_ADDRESS=127.0.0.1",
		"TEMPORAL_DYNAMIC_CONFIG="+filepath.Join(filepath.Dir(config), "dynamicconfig.yaml"),
		"TEMPORAL_LOG_LEVEL=warn",
	)
	for name, p := range ports {
		env = append(env, "TEMPORAL_"+name+"_PORT="+strconv.Itoa(p))
	}
	if t := opts.TLS; t != nil {
		env = append(env, "TEMPORAL_FRONTEND_TLS_CERT="+t.CertFile, "TEMPORAL_FRONTEND_TLS_KEY="+t.KeyFile,
			"TEMPORAL_FRONTEND_TLS_CLIENT_CA="+t.CAFile, "TEMPORAL_FRONTEND_TLS_SERVER_NAME="+t.ServerName,
			"TEMPORAL_FRONTEND_TLS_REQUIRE_CLIENT_AUTH="+strconv.FormatBool(t.RequireClientCert))
	}
	c := &Cluster{
		Address: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports["FRONTEND"])),
		opts:    opts, server: server, env: env,
		procs: map[string]*exec.Cmd{}, done: map[string]chan struct{}{},
	}
	for i, s := range Services {
		if err := c.StartService(s); err != nil {
			c.Stop()
			return nil, err
		}
		if i == 0 {
			// The first service writes the cluster's metadata into the
			// fresh database; the others, started with it, would race it
			// to the same row and exit on the duplicate key.
			if err := c.waitListening(ctx, s, ports[strings.ToUpper(s)+"_MEMBERSHIP"]); err != nil {
				c.Stop()
				return nil, err
			}
		}
	}
	if err := c.WaitReady(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// StartService starts one service's process (again, after a kill).
func (c *Cluster) StartService(name string) error {
	config, err := ConfigFile()
	if err != nil {
		return err
	}
	log, err := os.OpenFile(filepath.Join(c.opts.Dir, "temporal-"+name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.server, "--config-file", config, "--allow-no-auth", "start", "--service", name)
	cmd.Env, cmd.Stdout, cmd.Stderr = c.env, log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start temporal %s: %w", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(done) }()
	c.mu.Lock()
	c.procs[name], c.done[name] = cmd, done
	c.mu.Unlock()
	return nil
}

// Kill SIGKILLs services' processes (every one when names is empty) and
// waits until they are gone.
func (c *Cluster) Kill(names ...string) {
	if len(names) == 0 {
		names = Services
	}
	for _, name := range names {
		c.mu.Lock()
		cmd, done := c.procs[name], c.done[name]
		delete(c.procs, name)
		c.mu.Unlock()
		if cmd == nil {
			continue
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// Restart starts killed services again (every one when names is empty)
// and waits until the frontend answers.
func (c *Cluster) Restart(ctx context.Context, names ...string) error {
	if len(names) == 0 {
		names = Services
	}
	for _, name := range names {
		if err := c.StartService(name); err != nil {
			return err
		}
	}
	return c.WaitReady(ctx)
}

// WaitReady waits until the frontend answers a health check; a service
// process that exits meanwhile is an error naming it and its log.
func (c *Cluster) WaitReady(ctx context.Context) error {
	conn := c.Connection("default")
	var last error
	for {
		if err := c.exited(); err != nil {
			return err
		}
		cl, err := wiring.DialConnection(ctx, conn, slog.New(slog.DiscardHandler), 2*time.Second)
		if err == nil {
			err = servesCalls(ctx, cl)
			cl.Close()
			if err == nil {
				return nil
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("the cluster's frontend at %s did not answer (logs in %s): %w", c.Address, c.opts.Dir, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// waitListening waits until service name listens on port (its
// membership port: it is past its start, the cluster's metadata written),
// or fails with errExited when its process ends first.
func (c *Cluster) waitListening(ctx context.Context, name string, port int) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for {
		if err := c.exited(); err != nil {
			return err
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return conn.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("temporal %s did not listen at %s (logs in %s): %w", name, addr, c.opts.Dir, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// exited is an error for a started service whose process has ended.
func (c *Cluster) exited() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range Services {
		done, ok := c.done[name]
		if _, running := c.procs[name]; !ok || !running {
			continue
		}
		select {
		case <-done:
			log := filepath.Join(c.opts.Dir, "temporal-"+name+".log")
			return fmt.Errorf("%w: %s (log: %s)%s", errExited, name, log, logTail(log, 20))
		default:
		}
	}
	return nil
}

// logTail is the last lines of a service's log, indented below the error
// that names it: the directory holding the log is often gone (a test's
// temp dir) by the time someone reads the error.
func logTail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	all = all[max(0, len(all)-lines):]
	return "; its log ends:\n\t" + strings.Join(all, "\n\t")
}

// Connection is how a client of the test reaches the frontend; with TLS
// on, as the server's own certificate (the test issues others for clients).
func (c *Cluster) Connection(namespace string) wiring.Connection {
	conn := wiring.Connection{Address: c.Address, Namespace: namespace}
	if t := c.opts.TLS; t != nil {
		conn.TLSCA, conn.TLSServerName = t.CAFile, t.ServerName
		conn.TLSCert, conn.TLSKey = t.CertFile, t.KeyFile
	}
	return conn
}

// Port is the frontend's port.
func (c *Cluster) Port() string {
	_, port, _ := net.SplitHostPort(c.Address)
	return port
}

// Stop kills every process and drops the cluster's databases.
func (c *Cluster) Stop() {
	c.Kill()
	dropDatabases(c.opts.PostgresURL, c.databases...)
}

// dropDatabases drops what a cluster created, as far as it can: a test's
// PostgreSQL server should not fill up with them.
func dropDatabases(adminURL string, names ...string) {
	if len(names) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	for _, name := range names {
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	}
}

func createDatabases(ctx context.Context, adminURL string, names ...string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(ctx)
	for _, name := range names {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return fmt.Errorf("create database %s: %w", name, err)
		}
	}
	return nil
}

func redact(out []byte, secret string) []byte {
	if secret == "" {
		return out
	}
	return bytes.ReplaceAll(out, []byte(secret), []byte("***"))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// servesCalls checks that the frontend reaches history and matching, not
// only that it is up: a workflow's description is history's to give (none
// exists: NotFound is the answer of a history that serves), a task queue's
// matching's. Until both have joined, the frontend answers "Not enough
// hosts to serve the request".
func servesCalls(ctx context.Context, cl client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	const system = "temporal-system"
	_, err := cl.WorkflowService().DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: system, Execution: &commonpb.WorkflowExecution{WorkflowId: "evalflow-readiness-probe"},
	})
	var notFound *serviceerror.NotFound
	if err != nil && !errors.As(err, &notFound) {
		return fmt.Errorf("history does not serve yet: %w", err)
	}
	_, err = cl.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
		Namespace: system, TaskQueue: &taskqueuepb.TaskQueue{Name: "evalflow-readiness-probe"},
	})
	if err != nil {
		return fmt.Errorf("matching does not serve yet: %w", err)
	}
	return nil
}
