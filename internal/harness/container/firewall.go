package container

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// A sandbox that may reach the internet sits on the engine's bridge, in a
// network namespace of its own, and the worker fences that namespace
// before the agent's first process: its loopback and the internet, and
// nothing else. The rules live in the sandbox's own namespace, where no
// process of the sandbox can change them (a container has no
// CAP_NET_ADMIN), and are written from the host through nsenter, since an
// image need not carry iptables.
//
// Refused (a TCP reset, else an ICMP error, so a client fails at once):
//   - every address of the worker's host (its services bound to all
//     addresses, the bridge's gateway);
//   - the private, shared, link-local (cloud metadata) and multicast
//     ranges, which hold the engine's bridge and so every other sandbox;
//   - all of IPv6 but loopback (a host service bound to [::] answers on
//     the bridge's link-local address).
//
// The sandbox's name servers keep port 53, whatever their address.

// blockedRanges are the IPv4 ranges no sandbox reaches.
var blockedRanges = []string{
	"0.0.0.0/8",      // this network
	"10.0.0.0/8",     // private
	"100.64.0.0/10",  // shared (carrier-grade NAT)
	"127.0.0.0/8",    // loopback, from any interface but lo
	"169.254.0.0/16", // link-local: cloud metadata services
	"172.16.0.0/12",  // private
	"192.168.0.0/16", // private
	"224.0.0.0/4",    // multicast
	"240.0.0.0/4",    // reserved, broadcast
}

// fence is the rule set of one sandbox: hosts are the worker host's
// addresses, servers the sandbox's name servers.
func fence(hosts, servers []netip.Addr) (v4, v6 string) {
	return fenceWith(hosts, servers, netip.Prefix{}, true)
}

// fenceWith is fence for a container on a rollout's own network, peers
// (invalid: none): its other containers are reachable, still not the
// worker's host (the network's gateway is one of its addresses); without
// internet, nothing else is.
func fenceWith(hosts, servers []netip.Addr, peers netip.Prefix, internet bool) (v4, v6 string) {
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	b.WriteString("-A OUTPUT -o lo -j ACCEPT\n")
	for _, s := range servers {
		if s.Is4() {
			fmt.Fprintf(&b, "-A OUTPUT -d %s/32 -p udp --dport 53 -j ACCEPT\n", s)
			fmt.Fprintf(&b, "-A OUTPUT -d %s/32 -p tcp --dport 53 -j ACCEPT\n", s)
		}
	}
	reject := func(dst string) {
		fmt.Fprintf(&b, "-A OUTPUT -d %s -p tcp -j REJECT --reject-with tcp-reset\n", dst)
		fmt.Fprintf(&b, "-A OUTPUT -d %s -j REJECT --reject-with icmp-admin-prohibited\n", dst)
	}
	for _, h := range hosts {
		if h.Is4() {
			reject(h.String() + "/32")
		}
	}
	if peers.IsValid() {
		fmt.Fprintf(&b, "-A OUTPUT -d %s -j ACCEPT\n", peers.Masked())
	}
	for _, r := range blockedRanges {
		reject(r)
	}
	if !internet {
		reject("0.0.0.0/0")
	}
	b.WriteString("COMMIT\n")
	v4 = b.String()
	v6 = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
		"-A OUTPUT -o lo -j ACCEPT\n" +
		"-A OUTPUT -p tcp -j REJECT --reject-with tcp-reset\n" +
		"-A OUTPUT -j REJECT --reject-with icmp6-adm-prohibited\n" +
		"COMMIT\n"
	return v4, v6
}

// confine fences the network namespace of the process pid (a sandbox's
// first process, seen from this host).
func confine(ctx context.Context, pid int) error {
	return confineTo(ctx, pid, netip.Prefix{}, true)
}

// confineTo is confine with fenceWith's peers and internet.
func confineTo(ctx context.Context, pid int, peers netip.Prefix, internet bool) error {
	hosts, err := hostAddrs()
	if err != nil {
		return fmt.Errorf("fence the sandbox's network: %w", err)
	}
	ns := fmt.Sprintf("/proc/%d/ns/net", pid)
	v4, v6 := fenceWith(hosts, nameServers(filepath.Join(fmt.Sprintf("/proc/%d/root", pid), "etc/resolv.conf")), peers, internet)
	for _, t := range []struct{ tool, rules string }{{"iptables-restore", v4}, {"ip6tables-restore", v6}} {
		cmd := exec.CommandContext(ctx, "nsenter", "--net="+ns, "--", t.tool)
		cmd.Stdin = strings.NewReader(t.rules)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("fence the sandbox's network (%s in its namespace, as root; install iptables): %v: %s", t.tool, err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// hostAddrs are the addresses of this host's interfaces.
func hostAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out, nil
}

// nameServers are the IPv4 name servers of a resolv.conf.
func nameServers(path string) []netip.Addr {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []netip.Addr
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "nameserver" {
			if a, err := netip.ParseAddr(f[1]); err == nil && a.Unmap().Is4() && !a.IsLoopback() {
				out = append(out, a.Unmap())
			}
		}
	}
	return out
}
