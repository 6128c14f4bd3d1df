package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// Cluster is a PostgreSQL server of a test's own, in a temporary
// directory on a free loopback port, that the test may stop and start
// again (a restart, a failover). As root it runs as the postgres user,
// since postgres refuses to run as root.
type Cluster struct {
	// URL reaches the cluster's database.
	URL  string
	dir  string
	port int
	bin  string
	cred *syscall.Credential
}

// StartCluster initializes and starts a cluster; it is stopped and removed
// when t ends. It fails t when no PostgreSQL server binaries are installed.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := serverBin()
	require.NotEmpty(t, bin, "PostgreSQL server binaries (initdb, pg_ctl): install postgresql (make setup does)")
	root, err := os.MkdirTemp("", "evalflow-pg-")
	require.NoError(t, err)
	c := &Cluster{dir: filepath.Join(root, "data"), bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		require.NoError(t, err, "a postgres user to run the server as")
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		require.NoError(t, os.Chown(root, uid, gid))
	}
	t.Cleanup(func() {
		_ = c.pgCtl("stop", "-m", "immediate")
		_ = os.RemoveAll(root)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c.port = ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	out, err := c.command(filepath.Join(bin, "initdb"), "-D", c.dir, "-U", "evalflow", "-A", "trust", "--no-sync").CombinedOutput()
	require.NoError(t, err, "initdb: %s", out)
	c.Start(t)
	c.URL = fmt.Sprintf("postgres://evalflow:unused@127.0.0.1:%d/postgres?sslmode=disable", c.port)
	return c
}

// Start starts the cluster and waits until it accepts connections.
func (c *Cluster) Start(t testing.TB) {
	t.Helper()
	require.NoError(t, c.pgCtl("start", "-w", "-l", filepath.Join(filepath.Dir(c.dir), "log"),
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", c.port, filepath.Dir(c.dir))))
}

// Stop shuts the cluster down (fast: open connections are cut).
func (c *Cluster) Stop(t testing.TB) {
	t.Helper()
	require.NoError(t, c.pgCtl("stop", "-w", "-m", "fast"))
}

func (c *Cluster) pgCtl(args ...string) error {
	out, err := c.command(filepath.Join(c.bin, "pg_ctl"), append([]string{"-D", c.dir}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl %v: %w: %s", args, err, out)
	}
	return nil
}

func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = os.TempDir()
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd
}

// serverBin is the directory of the newest installed server binaries.
func serverBin() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		b, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return a < b
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "pg_ctl")); err == nil {
			return dirs[i]
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}
