package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSH exposes a port with a reverse port forward (ssh -R) through any SSH
// server: one SSH connection and one forward per exposure, on a port the
// server assigns. Consumers reach it at http://PublicHost:<assigned port>.
type SSH struct {
	// Addr is the SSH server, host:port.
	Addr string
	User string
	// KeyFile is a private key to authenticate with; with UseAgent the keys of
	// the agent at $SSH_AUTH_SOCK are offered too. The key never leaves the
	// worker.
	KeyFile  string
	UseAgent bool
	// KnownHostsFile verifies the server's host key. Required.
	KnownHostsFile string
	// RemoteBind is the address the server listens on for the forward;
	// "127.0.0.1" when empty. Anything else needs GatewayPorts on sshd.
	RemoteBind string
	// PublicHost is the host consumers dial; Addr's host when empty.
	PublicHost string
	// Timeout bounds one attempt (dial, handshake, forward); 30 s when 0.
	Timeout time.Duration
	// Limiter bounds creations (a HostLimiter shares the host's budget
	// among its workers); nil allows DefaultCreationsPerMinute in this
	// process.
	Limiter Limiter
	Retry   Retry

	once   sync.Once
	config *ssh.ClientConfig
	cfgErr error
}

var _ Tunnel = (*SSH)(nil)

// Validate reports a configuration that cannot work.
func (s *SSH) Validate() error {
	if _, _, err := net.SplitHostPort(s.Addr); err != nil {
		return fmt.Errorf("ssh tunnel: address %q: %w", s.Addr, err)
	}
	switch {
	case s.User == "":
		return errors.New("ssh tunnel: user is required")
	case s.KeyFile == "" && !s.UseAgent:
		return errors.New("ssh tunnel: a key file or the agent is required")
	case s.KnownHostsFile == "":
		return errors.New("ssh tunnel: a known_hosts file is required")
	}
	return nil
}

// BindHost implements Tunnel: the forward dials the server on loopback.
func (*SSH) BindHost() string { return "127.0.0.1" }

// clientConfig builds the SSH client configuration once.
func (s *SSH) clientConfig() (*ssh.ClientConfig, error) {
	s.once.Do(func() {
		if s.cfgErr = s.Validate(); s.cfgErr != nil {
			return
		}
		var auth []ssh.AuthMethod
		if s.KeyFile != "" {
			pem, err := os.ReadFile(s.KeyFile)
			if err != nil {
				s.cfgErr = fmt.Errorf("ssh key: %w", err)
				return
			}
			signer, err := ssh.ParsePrivateKey(pem)
			if err != nil {
				s.cfgErr = fmt.Errorf("ssh key %s: %w", s.KeyFile, err)
				return
			}
			auth = append(auth, ssh.PublicKeys(signer))
		}
		if s.UseAgent && os.Getenv("SSH_AUTH_SOCK") == "" {
			s.cfgErr = errors.New("ssh agent: SSH_AUTH_SOCK is not set")
			return
		}
		hostKeys, err := knownhosts.New(s.KnownHostsFile)
		if err != nil {
			s.cfgErr = fmt.Errorf("ssh known hosts: %w", err)
			return
		}
		s.config = &ssh.ClientConfig{User: s.User, Auth: auth, HostKeyCallback: hostKeys}
	})
	return s.config, s.cfgErr
}

// Expose implements Tunnel.
func (s *SSH) Expose(ctx context.Context, host string, port int) (Exposure, error) {
	cfg, err := s.clientConfig()
	if err != nil {
		return nil, &Error{Tunnel: "ssh", Op: "expose", Err: err}
	}
	exp, err := s.Retry.create(ctx, s.Limiter, func(ctx context.Context) (Exposure, error) {
		return s.start(ctx, cfg, net.JoinHostPort(host, strconv.Itoa(port)))
	})
	if err != nil {
		return nil, &Error{Tunnel: "ssh", Op: "expose", Err: err}
	}
	return exp, nil
}

// start dials the server, asks for the forward and starts relaying it.
func (s *SSH) start(ctx context.Context, cfg *ssh.ClientConfig, local string) (*sshExposure, error) {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", s.Addr)
	if err != nil {
		return nil, fmt.Errorf("dial ssh server: %w", err)
	}
	// The handshake and the forward request do not take a context: the
	// deadline and closing the connection on cancel bound them.
	_ = conn.SetDeadline(time.Now().Add(timeout))
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	if s.UseAgent {
		// The agent signs during the handshake, so its connection lives
		// until the handshake is over.
		sock, err := (&net.Dialer{}).DialContext(ctx, "unix", os.Getenv("SSH_AUTH_SOCK"))
		if err != nil {
			stop()
			_ = conn.Close()
			return nil, fmt.Errorf("ssh agent: %w", err)
		}
		defer sock.Close()
		withAgent := *cfg
		withAgent.Auth = append(slices.Clip(cfg.Auth), ssh.PublicKeysCallback(agent.NewClient(sock).Signers))
		cfg = &withAgent
	}
	c, chans, reqs, err := ssh.NewClientConn(conn, s.Addr, cfg)
	if err != nil {
		stop()
		_ = conn.Close()
		return nil, fmt.Errorf("ssh handshake: %w", err)
	}
	client := ssh.NewClient(c, chans, reqs)
	bind := s.RemoteBind
	if bind == "" {
		bind = "127.0.0.1"
	}
	ln, err := client.Listen("tcp", net.JoinHostPort(bind, "0"))
	if !stop() || err != nil {
		_ = client.Close()
		if err == nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("ssh remote forward: %w", err)
	}
	_ = conn.SetDeadline(time.Time{})
	remote := ln.Addr().(*net.TCPAddr).Port
	public := s.PublicHost
	if public == "" {
		public, _, _ = net.SplitHostPort(s.Addr)
	}
	e := &sshExposure{
		url:    "http://" + net.JoinHostPort(public, strconv.Itoa(remote)),
		client: client, ln: ln, local: local, dead: make(chan struct{}),
	}
	go func() {
		e.waitErr = client.Wait()
		close(e.dead)
	}()
	e.relays.Add(1)
	go e.serve()
	return e, nil
}

// sshExposure is one SSH connection carrying one remote forward.
type sshExposure struct {
	url     string
	client  *ssh.Client
	ln      net.Listener
	local   string
	dead    chan struct{}
	waitErr error
	relays  sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

var _ Watched = (*sshExposure)(nil)

func (e *sshExposure) URL() string { return e.url }

// Err implements Watched: the SSH connection is gone.
func (e *sshExposure) Err() error {
	select {
	case <-e.dead:
		if e.waitErr != nil {
			return fmt.Errorf("ssh connection closed: %w", e.waitErr)
		}
		return errors.New("ssh connection closed")
	default:
		return nil
	}
}

// serve relays every forwarded connection to the local port.
func (e *sshExposure) serve() {
	defer e.relays.Done()
	for {
		remote, err := e.ln.Accept()
		if err != nil {
			return
		}
		e.relays.Add(1)
		go func() {
			defer e.relays.Done()
			defer remote.Close()
			local, err := net.Dial("tcp", e.local)
			if err != nil {
				return
			}
			defer local.Close()
			pipe(remote, local)
		}()
	}
}

// pipe copies both ways until either side is done, then closes both.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	_ = a.Close()
	_ = b.Close()
	<-done
}

// Close cancels the forward (the server closes its port) and the connection.
func (e *sshExposure) Close() error {
	e.closeOnce.Do(func() {
		lnErr := e.ln.Close()
		if err := e.client.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			e.closeErr = err
		} else if lnErr != nil && !errors.Is(lnErr, io.EOF) && e.Err() == nil {
			e.closeErr = lnErr
		}
		e.relays.Wait()
	})
	return e.closeErr
}
