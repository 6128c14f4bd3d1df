package devserver

import (
	"errors"
	"fmt"
	"net"
	"strconv"
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
	for _, f := range fixed {
		if err := checkFree(cfg.IP, f.port, f.flag); err != nil {
			return ports{}, err
		}
	}
	// Hold every internal listener until all are chosen so no two coincide.
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for _, dst := range []*int{&p.history, &p.matching, &p.worker} {
		ln, err := net.Listen("tcp", net.JoinHostPort(cfg.IP, "0"))
		if err != nil {
			return ports{}, fmt.Errorf("pick a free port on %s: %w", cfg.IP, err)
		}
		lns = append(lns, ln)
		*dst = ln.Addr().(*net.TCPAddr).Port
	}
	return p, nil
}

// checkFree reports whether port can be listened on at ip; flag names the
// option that moves it.
func checkFree(ip string, port int, flag string) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("port %d is out of range", port)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		if errors.Is(err, errAddrInUse) {
			return fmt.Errorf("port %d is in use: is another Temporal server running? "+
				"use --address to dial it or %s to pick another: %w", port, flag, err)
		}
		return fmt.Errorf("listen on port %d: %w", port, err)
	}
	return ln.Close()
}
