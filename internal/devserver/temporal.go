package devserver

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/common/primitives/timestamp"
	"go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

const (
	clusterName = "active"
	// retention is how long closed workflows stay in a created namespace.
	retention = 7 * 24 * time.Hour
)

// maxBufferedEvents bounds the events that may wait for one workflow task
// (history.maximumBufferedEventsBatch).
const maxBufferedEvents = 2000

func dbPath(dataDir string) string { return filepath.Join(dataDir, "temporal.db") }

// sqlConfig is the SQLite store: WAL so readers do not block the writer, and
// synchronous=NORMAL, which in WAL mode survives a process crash.
func sqlConfig(dataDir string) *config.SQL {
	return &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: dbPath(dataDir),
		ConnectAttributes: map[string]string{
			"mode":         "rwc",
			"journal_mode": "wal",
			"synchronous":  "NORMAL",
			"busy_timeout": "10000",
		},
	}
}

// prepareStore sets the schema up when the database file is new and creates
// the namespace when it is missing.
func prepareStore(cfg Config, sql *config.SQL) error {
	_, err := os.Stat(sql.DatabaseName)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := sqlite.SetupSchema(sql); err != nil {
			// A half-made schema would be skipped on the next start: start over.
			for _, suffix := range []string{"", "-wal", "-shm"} {
				_ = os.Remove(sql.DatabaseName + suffix)
			}
			return fmt.Errorf("set up sqlite schema: %w", err)
		}
	case err != nil:
		return fmt.Errorf("stat database: %w", err)
	}

	ns, err := sqlite.NewNamespaceConfig(clusterName, cfg.Namespace, false, cfg.SearchAttributes)
	if err != nil {
		return fmt.Errorf("namespace %q: %w", cfg.Namespace, err)
	}
	ns.Detail.Config.Retention = timestamp.DurationPtr(retention)
	if err := sqlite.CreateNamespaces(sql, ns); err != nil {
		return fmt.Errorf("create namespace %q: %w", cfg.Namespace, err)
	}
	return nil
}

// newTemporal prepares the store and builds (without starting) the server.
func newTemporal(cfg Config, p ports, logger log.Logger) (temporal.Server, error) {
	sql := sqlConfig(cfg.DataDir)
	if err := prepareStore(cfg, sql); err != nil {
		return nil, err
	}

	host := func(port int) string { return net.JoinHostPort(cfg.dialIP(), strconv.Itoa(port)) }
	service := func(port int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: port, BindOnIP: cfg.IP}}
	}
	frontend := service(p.frontend)
	frontend.RPC.HTTPPort = p.frontendHTTP

	serverCfg := &config.Config{
		Global: config.Global{
			Membership: config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: cfg.dialIP()},
		},
		Persistence: config.Persistence{
			DefaultStore:     sqliteplugin.PluginName,
			VisibilityStore:  sqliteplugin.PluginName,
			NumHistoryShards: 1,
			DataStores:       map[string]config.DataStore{sqliteplugin.PluginName: {SQL: sql}},
		},
		ClusterMetadata: &cluster.Config{
			FailoverVersionIncrement: 10,
			MasterClusterName:        clusterName,
			CurrentClusterName:       clusterName,
			ClusterInformation: map[string]cluster.ClusterInformation{
				clusterName: {Enabled: true, InitialFailoverVersion: 1, RPCAddress: host(p.frontend)},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services: map[string]config.Service{
			string(primitives.FrontendService): frontend,
			string(primitives.HistoryService):  service(p.history),
			string(primitives.MatchingService): service(p.matching),
			string(primitives.WorkerService):   service(p.worker),
		},
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{
			Archival: config.ArchivalNamespaceDefaults{
				History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
				Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
			},
		},
		PublicClient: config.PublicClient{HostPort: host(p.frontend)},
	}
	if t := cfg.TLS; t != nil {
		serverCfg.Global.TLS = config.RootTLS{
			Frontend: config.GroupTLS{Server: config.ServerTLS{
				CertFile: t.CertFile, KeyFile: t.KeyFile, ClientCAFiles: []string{t.CAFile}, RequireClientAuth: t.RequireClientCert,
			}},
			SystemWorker: config.WorkerTLS{CertFile: t.CertFile, KeyFile: t.KeyFile,
				Client: config.ClientTLS{ServerName: t.ServerName, RootCAFiles: []string{t.CAFile}}},
		}
	}
	var authorizer authorization.Authorizer = authorization.NewNoopAuthorizer()
	if cfg.Authorizer != nil {
		authorizer = cfg.Authorizer
	}
	var claimMapper authorization.ClaimMapper = authorization.NewNoopClaimMapper()
	if cfg.ClaimMapper != nil {
		claimMapper = cfg.ClaimMapper
	}

	// Static hosts replace ringpop membership, whose join races at start-up.
	hosts := map[primitives.ServiceName]static.Hosts{
		primitives.FrontendService: static.SingleLocalHost(host(p.frontend)),
		primitives.HistoryService:  static.SingleLocalHost(host(p.history)),
		primitives.MatchingService: static.SingleLocalHost(host(p.matching)),
		primitives.WorkerService:   static.SingleLocalHost(host(p.worker)),
	}

	srv, err := temporal.NewServer(
		temporal.WithConfig(serverCfg),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper {
			return claimMapper
		}),
		temporal.WithDynamicConfigClient(dynamicconfig.StaticClient{
			// Custom search attributes are read fresh, so a just-registered one works at once.
			dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true,
			// One partition per task queue: a single-host server gains
			// nothing from more, and tasks on a partition no poller sits on
			// wait to be forwarded, which delays rollouts by seconds.
			dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
			dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,
			// Hundreds of rollouts in flight finish, and signal their slots,
			// while a workflow task runs; past this many events waiting for
			// it the server fails the task and the work is done again.
			// 100 (the default) is reached at 256 rollouts in flight on 2
			// cores (faults.TestManyInFlightOnTwoCores).
			dynamicconfig.MaximumBufferedEventsBatch.Key(): maxBufferedEvents,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("create temporal server: %w", err)
	}
	return srv, nil
}
