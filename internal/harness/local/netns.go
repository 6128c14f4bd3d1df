package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/hostpaths"
	"github.com/evalflow/evalflow/tasksets"
)

var (
	_ harness.Remote      = (*Netns)(nil)
	_ harness.Verifier    = (*Netns)(nil)
	_ harness.TaskChecker = (*Netns)(nil)
)

// Netns runs harnesses as local subprocesses inside a network namespace
// joined to this host by a veth pair: the harness reaches the host only at
// HostIP, never at the host's loopback, so like a harness in a remote
// sandbox it needs a tunnel to reach the interception server. It needs root
// and iproute2 (`ip netns`).
type Netns struct {
	// Name is the namespace, under /run/netns.
	Name string
	// HostIP is this host's address on the veth pair, the only host address
	// the namespace reaches; NSIP is the namespace's.
	HostIP, NSIP string
	// Local runs the wrapped command (workdirs, timeouts, process groups).
	Local Runtime

	hostLink string
}

// NewNetns creates a namespace and a veth pair on the /30 subnet starting at
// subnet (for example "10.213.7.0"). Close removes both.
func NewNetns(ctx context.Context, subnet string, local Runtime) (*Netns, error) {
	ip := net.ParseIP(subnet).To4()
	if ip == nil || ip[3]%4 != 0 {
		return nil, fmt.Errorf("netns subnet %q is not the start of an IPv4 /30", subnet)
	}
	host, ns := net.IPv4(ip[0], ip[1], ip[2], ip[3]+1).String(), net.IPv4(ip[0], ip[1], ip[2], ip[3]+2).String()
	if err := subnetFree(ip); err != nil {
		return nil, err
	}
	id := make([]byte, 4)
	_, _ = rand.Read(id)
	suffix := hex.EncodeToString(id)
	n := &Netns{Name: "evalflow-" + suffix, HostIP: host, NSIP: ns, Local: local, hostLink: "ef" + suffix + "h"}
	nsLink := "ef" + suffix + "n"
	steps := [][]string{
		{"netns", "add", n.Name},
		{"link", "add", n.hostLink, "type", "veth", "peer", "name", nsLink},
		{"link", "set", nsLink, "netns", n.Name},
		{"addr", "add", host + "/30", "dev", n.hostLink},
		{"link", "set", n.hostLink, "up"},
		{"-n", n.Name, "addr", "add", ns + "/30", "dev", nsLink},
		{"-n", n.Name, "link", "set", nsLink, "up"},
		{"-n", n.Name, "link", "set", "lo", "up"},
	}
	for _, args := range steps {
		if err := ipCmd(ctx, args...); err != nil {
			_ = n.Close()
			return nil, err
		}
	}
	return n, nil
}

// Remote implements harness.Remote.
func (*Netns) Remote() bool { return true }

// Run runs the harness inside the namespace.
func (n *Netns) Run(ctx context.Context, spec harness.Spec) (harness.Result, error) {
	if len(spec.Command) == 0 {
		return harness.Result{}, errors.New("run harness: empty command")
	}
	// ip execs the command in place: it keeps the process group and the
	// Pdeathsig Runtime gives it, so it dies with the worker like any harness.
	spec.Command = append([]string{"ip", "netns", "exec", n.Name}, spec.Command...)
	return n.Local.Run(ctx, spec)
}

// CheckTask refuses what Runtime refuses: the namespace sees the host's
// files.
func (n *Netns) CheckTask(task tasksets.Task) error {
	if err := refuseSeparate(task, "netns"); err != nil {
		return err
	}
	return hostpaths.Check(task, "netns")
}

// Close deletes the namespace and the veth pair.
func (n *Netns) Close() error {
	var errs []error
	if err := ipCmd(context.Background(), "netns", "del", n.Name); err != nil && !strings.Contains(err.Error(), "No such file") {
		errs = append(errs, err)
	}
	// Deleting the namespace deletes the pair; this catches a half-made setup.
	_ = ipCmd(context.Background(), "link", "del", n.hostLink)
	return errors.Join(errs...)
}

func ipCmd(ctx context.Context, args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Verify runs the verifier inside the namespace too: it runs code the
// agent wrote, which gets no more network than the agent had.
func (n *Netns) Verify(ctx context.Context, spec harness.VerifySpec) (harness.VerifyResult, error) {
	return n.Local.verify(ctx, spec, func(argv []string) []string {
		return append([]string{"ip", "netns", "exec", n.Name}, argv...)
	})
}

// subnetFree fails when an interface of the host already has an address in
// the /30 that starts at ip: a second namespace there would route its
// harnesses' packets to the first, and they would time out unexplained.
func subnetFree(ip net.IP) error {
	subnet := &net.IPNet{IP: ip, Mask: net.CIDRMask(30, 32)}
	ifaces, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("netns: list interfaces: %w", err)
	}
	for _, iface := range ifaces {
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if in, ok := a.(*net.IPNet); ok && subnet.Contains(in.IP) {
				return fmt.Errorf("netns subnet %s is in use by interface %s (a namespace left by a worker that was killed? see `ip netns list`)", subnet, iface.Name)
			}
		}
	}
	return nil
}
