package devserver

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	"github.com/temporalio/ui-server/v2/server/server_options"
)

// uiServer is the Temporal Web UI, serving its embedded assets.
type uiServer struct {
	srv  *uiserver.Server
	done chan struct{}
}

// startUI starts the UI on cfg.UIPort and waits until it accepts connections,
// so a following stop cannot race its listen. The port was checked free
// before: the UI server exits the process on a listen error.
func startUI(ctx context.Context, cfg Config, frontend string) (*uiServer, error) {
	srv := uiserver.NewServer(server_options.WithConfigProvider(&uiconfig.Config{
		Host:                cfg.IP,
		Port:                cfg.UIPort,
		TemporalGRPCAddress: frontend,
		EnableUI:            true,
		DefaultNamespace:    cfg.Namespace,
		CORS:                uiconfig.CORS{CookieInsecure: true},
		HideLogs:            true,
		DisableNewsFetch:    true,
	}))
	u := &uiServer{srv: srv, done: make(chan struct{})}
	go func() {
		defer close(u.done)
		_ = srv.Start() // returns nil once stopped; exits the process on other errors
	}()

	addr := net.JoinHostPort(cfg.dialIP(), strconv.Itoa(cfg.UIPort))
	if err := poll(ctx, func(ctx context.Context) error {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return conn.Close()
	}); err != nil {
		u.stop()
		return nil, fmt.Errorf("wait for web ui on %s: %w", addr, err)
	}
	return u, nil
}

// stop closes the UI server and waits for its Start to return.
func (u *uiServer) stop() {
	u.srv.Stop()
	<-u.done
}

// poll calls try until it succeeds or ctx ends, returning the last error.
func poll(ctx context.Context, try func(context.Context) error) error {
	const interval = 20 * time.Millisecond
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := try(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}
