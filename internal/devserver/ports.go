package devserver

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// ports are the listen ports of one server start.
type ports struct {
	frontend, frontendHTTP, history, matching, worker int
}

// fixedPort is a configured port and the starter flag that moves it.
type fixedPort struct {
	port int
	flag string
}

// allocatePorts checks that the fixed ports (frontend gRPC and HTTP, UI) are
// free and picks free ports for the internal services. Checking first turns a
// port in use into an error instead of a crash deep inside a server.
func allocatePorts(cfg Config) (ports, error) {
	p := ports{frontend: cfg.Port, frontendHTTP: cfg.Port + httpPortOffset}
	fixed := []fixedPort{{p.frontend, "--port"}, {p.frontendHTTP, "--port"}}
	if cfg.UIPort > 0 {
		fixed = append(fixed, fixedPort{cfg.UIPort, "--ui-port"})
	}
	// Hold every listener until all ports are chosen, so that no internal
	// port is a fixed one and no two coincide.
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for _, f := range fixed {
		ln, err := listenFree(cfg.IP, f.port, f.flag)
		if err != nil {
			return ports{}, err
		}
		lns = append(lns, ln)
	}
	for _, dst := range []*int{&p.history, &p.matching, &p.worker} {
		ln, err := listenStatic(cfg.IP)
		if err != nil {
			return ports{}, fmt.Errorf("pick a free port on %s: %w", cfg.IP, err)
		}
		lns = append(lns, ln)
		*dst = ln.Addr().(*net.TCPAddr).Port
	}
	return p, nil
}

// FreePort is a port free on ip now, outside the kernel's ephemeral range:
// between its check and the server's bind, no outgoing connection or
// listener on port 0 of another program can take it (a port taken there
// makes the Temporal server exit the process).
func FreePort(ip string) (int, error) {
	ln, err := listenStatic(ip)
	if err != nil {
		return 0, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	return port, ln.Close()
}

// staticLow is the lowest port listenStatic picks.
const staticLow = 10000

// listenStatic listens on a free port of ip below the ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), starting at a random one.
func listenStatic(ip string) (net.Listener, error) {
	// Room for the frontend's HTTP port above a picked frontend port.
	high := ephemeralLow() - httpPortOffset
	if high <= staticLow+1000 {
		return net.Listen("tcp", net.JoinHostPort(ip, "0"))
	}
	n := high - staticLow
	start := rand.IntN(n)
	for i := range n {
		port := staticLow + (start+i)%n
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err == nil {
			return ln, nil
		}
		if !errors.Is(err, errAddrInUse) {
			return nil, err
		}
	}
	return net.Listen("tcp", net.JoinHostPort(ip, "0"))
}

// ephemeralLow is the first port of the kernel's ephemeral range, 32768
// when it cannot be read.
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return low
}

// listenFree listens on port at ip, or says why it cannot; flag names the
// option that moves it.
func listenFree(ip string, port int, flag string) (net.Listener, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("port %d is out of range", port)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		if errors.Is(err, errAddrInUse) {
			return nil, fmt.Errorf("port %d is in use: is another Temporal server running? "+
				"use --address to dial it or %s to pick another: %w", port, flag, err)
		}
		return nil, fmt.Errorf("listen on port %d: %w", port, err)
	}
	return ln, nil
}
