package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// ExecConfig is a command to run in a running container.
type ExecConfig struct {
	Cmd []string `json:"Cmd"`
	// Env is added to the container's environment, KEY=VALUE.
	Env        []string `json:"Env,omitempty"`
	WorkingDir string   `json:"WorkingDir,omitempty"`
	User       string   `json:"User,omitempty"`
}

// Exec runs cmd in container id, copying its output to stdout and stderr
// (either may be nil), and returns its exit code as the engine reports it.
// A cancelled ctx stops the copying, not the command: the caller ends the
// command by removing its container.
func (c *Client) Exec(ctx context.Context, id string, cfg ExecConfig, stdout, stderr io.Writer) (int, error) {
	body := struct {
		ExecConfig
		AttachStdout bool `json:"AttachStdout"`
		AttachStderr bool `json:"AttachStderr"`
	}{cfg, true, true}
	var created struct {
		ID string `json:"Id"`
	}
	if err := c.call(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/exec", nil, body, &created); err != nil {
		return 0, err
	}
	start := map[string]bool{"Detach": false, "Tty": false}
	resp, err := c.requestJSON(ctx, http.MethodPost, "/exec/"+url.PathEscape(created.ID)+"/start", start)
	if err != nil {
		return 0, err
	}
	err = demux(resp.Body, orDiscard(stdout), orDiscard(stderr))
	resp.Body.Close()
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, &UnavailableError{Host: c.host, Err: fmt.Errorf("read exec output: %w", err)}
	}
	var state struct {
		Running  bool
		ExitCode *int
	}
	if err := c.call(ctx, http.MethodGet, "/exec/"+url.PathEscape(created.ID)+"/json", nil, nil, &state); err != nil {
		return 0, err
	}
	if state.Running || state.ExitCode == nil {
		return 0, fmt.Errorf("engine: exec %s: output ended but the command has no exit code", created.ID)
	}
	return *state.ExitCode, nil
}

// requestJSON sends in as a JSON body of known length: an engine that
// takes the connection over for its answer (exec start) must have read
// the whole request first.
func (c *Client) requestJSON(ctx context.Context, method, path string, in any) (*http.Response, error) {
	data, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	return c.request(ctx, method, path, nil, bytes.NewReader(data), "application/json")
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// demux splits the engine's multiplexed stream: frames of an 8-byte
// header (stream 1 stdout, 2 stderr; big-endian length) and a payload.
func demux(r io.Reader, stdout, stderr io.Writer) error {
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		n := int64(binary.BigEndian.Uint32(hdr[4:]))
		w := stdout
		if hdr[0] == 2 {
			w = stderr
		}
		if _, err := io.CopyN(w, r, n); err != nil {
			return err
		}
	}
}
