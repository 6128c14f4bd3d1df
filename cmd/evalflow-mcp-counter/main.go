// Command evalflow-mcp-counter is a small MCP tool server, the example of a
// task's tool server: its tool "increment" adds to a counter it keeps in
// the rollout's shared state ({base}/state, member "counter"), and "read"
// returns the counter. It reaches the state at EVALFLOW_STATE_URL with the
// secret in EVALFLOW_ROLLOUT_SECRET, both from its environment, and writes
// its process id to the state ("pid") as it starts, so that a test can
// tell that its harness started it and that it is gone after the rollout.
//
// It speaks MCP over stdin and stdout, or streamable HTTP with --http ADDR.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if err := run(); err != nil {
		log.Printf("evalflow-mcp-counter: %v", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("http", "", "serve streamable HTTP at this address (path /mcp) instead of stdio")
	flag.Parse()
	st := &state{url: os.Getenv("EVALFLOW_STATE_URL"), secret: os.Getenv("EVALFLOW_ROLLOUT_SECRET"),
		client: &http.Client{Timeout: 30 * time.Second}}
	if st.url == "" || st.secret == "" {
		return errors.New("EVALFLOW_STATE_URL and EVALFLOW_ROLLOUT_SECRET must be set")
	}
	pid, _ := json.Marshal(map[string]int{"pid": os.Getpid()})
	if _, err := st.do(context.Background(), http.MethodPatch, pid); err != nil {
		return err
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "evalflow-mcp-counter", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "increment", Description: "Add to the counter (by 1 unless told) and return its new value."}, st.increment)
	mcp.AddTool(srv, &mcp.Tool{Name: "read", Description: "Return the counter's value."}, st.read)
	if *addr == "" {
		return srv.Run(context.Background(), &mcp.StdioTransport{})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	return (&http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}).ListenAndServe()
}

// state is the rollout's shared state over HTTP.
type state struct {
	url, secret string
	client      *http.Client
}

type incrementArgs struct {
	By int `json:"by,omitempty" jsonschema:"how much to add; 1 when absent"`
}

type counterValue struct {
	Counter int `json:"counter" jsonschema:"the counter's value"`
}

func (s *state) increment(ctx context.Context, _ *mcp.CallToolRequest, in incrementArgs) (*mcp.CallToolResult, counterValue, error) {
	by := in.By
	if by == 0 {
		by = 1
	}
	cur, err := s.counter(ctx)
	if err != nil {
		return nil, counterValue{}, err
	}
	next := cur + by
	patch, _ := json.Marshal(map[string]int{"counter": next})
	if _, err := s.do(ctx, http.MethodPatch, patch); err != nil {
		return nil, counterValue{}, err
	}
	return nil, counterValue{Counter: next}, nil
}

func (s *state) read(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, counterValue, error) {
	n, err := s.counter(ctx)
	return nil, counterValue{Counter: n}, err
}

func (s *state) counter(ctx context.Context) (int, error) {
	body, err := s.do(ctx, http.MethodGet, nil)
	if err != nil {
		return 0, err
	}
	var v counterValue
	if err := json.Unmarshal(body, &v); err != nil {
		return 0, fmt.Errorf("read state: %w", err)
	}
	return v.Counter, nil
}

func (s *state) do(ctx context.Context, method string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s state: %w", method, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%s state: %w", method, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s state: %s", method, resp.Status)
	}
	return out, nil
}
