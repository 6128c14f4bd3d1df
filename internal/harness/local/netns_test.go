package local_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/tasksets"
)

func newNetns(t *testing.T, subnet string) *local.Netns {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	_, err := exec.LookPath("ip")
	require.NoError(t, err, "network namespaces need iproute2 (make setup installs it)")
	n, err := local.NewNetns(context.Background(), subnet, local.Runtime{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, n.Close()) })
	return n
}

func TestNetnsReachesOnlyTheHostAddress(t *testing.T) {
	n := newNetns(t, "10.213.250.0")
	assert.True(t, harness.IsRemote(n))

	loop, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer loop.Close()
	onVeth, err := net.Listen("tcp", net.JoinHostPort(n.HostIP, "0"))
	require.NoError(t, err)
	defer onVeth.Close()
	for _, ln := range []net.Listener{loop, onVeth} {
		go func() { _ = http.Serve(ln, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})) }()
	}

	tests := []struct {
		addr string
		want int
	}{
		{loop.Addr().String(), 1},   // the host's loopback is not the namespace's
		{onVeth.Addr().String(), 0}, // the host's veth address is reachable
	}
	for _, tt := range tests {
		res, err := n.Run(context.Background(), harness.Spec{
			Key: "netns/0/0/0", Command: []string{"bash", "-c", "exec 3<>/dev/tcp/${0%:*}/${0##*:}", tt.addr},
		})
		require.NoError(t, err)
		assert.Equal(t, tt.want, res.ExitCode, "connect to %s from the namespace: %s", tt.addr, res.Stderr)
	}
}

func TestNetnsCloseRemovesNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	n, err := local.NewNetns(context.Background(), "10.213.251.0", local.Runtime{})
	require.NoError(t, err)
	require.NoError(t, n.Close())
	out, err := exec.Command("ip", "netns", "list").Output()
	require.NoError(t, err)
	assert.NotContains(t, string(out), n.Name)

	_, err = local.NewNetns(context.Background(), "10.213.251.1", local.Runtime{})
	assert.Error(t, err, "a subnet not on a /30 boundary")
}

// TestNetnsVerify: the verifier runs inside the namespace too, with the
// tests at their host path.
func TestNetnsVerify(t *testing.T) {
	n := newNetns(t, "10.213.252.0")
	ws, err := harness.PrepareWorkspace(t.TempDir(), tasksets.Task{ID: "t"}, harness.PrepareOptions{})
	require.NoError(t, err)
	defer ws.Remove()
	tests := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(tests, "test.sh"), []byte(`ip netns identify $$; echo 1 > "$EVALFLOW_VERIFIER_LOGS/reward.txt"`), 0o644))
	got, err := n.Verify(context.Background(), harness.VerifySpec{Workspace: ws, Tests: tests, Command: "sh /tests/test.sh"})
	require.NoError(t, err)
	assert.Equal(t, 1.0, got.Reward)
	assert.Equal(t, n.Name+"\n", got.Stdout)
}

// A second namespace on a subnet already in use is refused by name: its
// harnesses' packets would go to the first one's link and time out.
func TestNetnsRefusesASubnetInUse(t *testing.T) {
	newNetns(t, "10.213.77.0")
	_, err := local.NewNetns(context.Background(), "10.213.77.0", local.Runtime{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "10.213.77.0/30 is in use by interface")
}
