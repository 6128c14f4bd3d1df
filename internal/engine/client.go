// Package engine is a small client of the Docker Engine API (v1.41), the
// API that Docker and Podman's compatible service both serve: images
// (inspect, build, pull), containers (create, start, inspect, list,
// remove), exec with the exit code read from the engine, and copying into
// and out of a container. It holds no state but the connection.
package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// APIVersion is the API version asked of the engine.
const APIVersion = "v1.41"

// DefaultHost is the engine's address when DOCKER_HOST is not set.
const DefaultHost = "unix:///var/run/docker.sock"

// Client talks to one engine.
type Client struct {
	host string // as given: unix:///path or tcp://host:port
	base string // URL prefix of every request
	http *http.Client
}

// FromEnv is a client of the engine DOCKER_HOST names, else DefaultHost.
func FromEnv() (*Client, error) {
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		host = DefaultHost
	}
	return New(host)
}

// New is a client of the engine at host: unix:///path/to/socket, or
// tcp://host:port (plain HTTP).
func New(host string) (*Client, error) {
	u, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("engine address %q: %w", host, err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	c := &Client{host: host, http: &http.Client{Transport: tr}}
	switch u.Scheme {
	case "unix":
		sock := u.Path
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}
		c.base = "http://engine/" + APIVersion
	case "tcp", "http":
		c.base = "http://" + u.Host + "/" + APIVersion
	default:
		return nil, fmt.Errorf("engine address %q: want unix:// or tcp://", host)
	}
	return c, nil
}

// Host is the engine's address as given.
func (c *Client) Host() string { return c.host }

// Close closes idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Error is an answer of the engine other than success.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("engine: %s (HTTP %d)", e.Message, e.Status) }

// IsNotFound reports whether err is the engine's 404.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// UnavailableError is an engine that could not be reached.
type UnavailableError struct {
	Host string
	Err  error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("container engine at %s: %v", e.Host, e.Err)
}
func (e *UnavailableError) Unwrap() error { return e.Err }

// EngineUnavailable marks the error as an engine that could not be
// reached, for callers that do not import this package.
func (e *UnavailableError) EngineUnavailable() bool { return true }

// request sends method path?query with body and returns the response once
// its status is a success; any other status is an *Error.
func (c *Client) request(ctx context.Context, method, path string, query url.Values, body io.Reader, contentType string) (*http.Response, error) {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &UnavailableError{Host: c.host, Err: err}
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var m struct {
			Message string `json:"message"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &m) == nil && m.Message != "" {
			msg = m.Message
		}
		return nil, &Error{Status: resp.StatusCode, Message: msg}
	}
	return resp, nil
}

// call sends in as JSON (nil: no body) and decodes the answer into out
// (nil: discarded).
func (c *Client) call(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body io.Reader
	ct := ""
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, ct = bytes.NewReader(data), "application/json"
	}
	resp, err := c.request(ctx, method, path, query, body, ct)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// Version is what the engine says of itself.
type Version struct {
	Version    string
	APIVersion string `json:"ApiVersion"`
	Os         string
	Arch       string
	Components []struct{ Name, Version string }
}

// Version asks the engine for its version: the check that it answers.
func (c *Client) Version(ctx context.Context) (Version, error) {
	var v Version
	err := c.call(ctx, http.MethodGet, "/version", nil, nil, &v)
	return v, err
}

// Name is the engine's product name ("Podman Engine", "Docker Engine - Community").
func (v Version) Name() string {
	for _, c := range v.Components {
		if c.Name != "" {
			return c.Name
		}
	}
	return "engine"
}
