package faults

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/workflows"
)

// The storm harness: this test binary, started by a worker as a rollout's
// harness command (binary, then the agent's path), holding the harness env
// contract. One rollout of the run sends malformed requests to every route
// of its own interception server and writes down what came back; then every
// rollout answers its task with the agent.
const (
	// stormEnv is the directory the storm writes to; set, this binary is a
	// storm harness.
	stormEnv = "EVALFLOW_FAULTS_STORM"
	// stormSecretsEnv is the directory harnesses write their secrets down
	// in, for the scan; the gateway token's file is there.
	stormSecretsEnv = "EVALFLOW_FAULTS_SECRETS"
	// stormResults is the storm's record in its directory.
	stormResults = "storm.json"
	// dripEvery is the slow drip's pace: a byte every 100 ms.
	dripEvery = 100 * time.Millisecond
	// bodyReadTimeout is the worker's --interception.body-read-timeout in
	// the storm: a drip outlasts it.
	bodyReadTimeout = time.Second
	// hugeBody is the size of the storm's huge bodies.
	hugeBody = 100 << 20
)

// stormCases are the malformed inputs, each sent to every route.
var stormCases = []string{"random-bytes", "truncated", "deep-nesting", "huge-numbers", "invalid-utf8",
	"100MB", "100MB-chunked", "slow-drip"}

// stormResult is what one malformed request got back.
type stormResult struct {
	Method, Route, Case string
	// Status is 0 when no answer came (Err says why).
	Status int
	// Shape is the error shape of the answer: openai, anthropic, gateway,
	// or "" when it is no error of a known shape.
	Shape string
	// Baseline is the route's status to a clean request without a body.
	Baseline int
	Err      string
	Excerpt  string
	Millis   int64
}

// stormIfAsked runs this binary as the storm harness when a worker started
// it as one; it never returns then.
func stormIfAsked() {
	out := os.Getenv(stormEnv)
	if out == "" {
		return
	}
	if err := storm(out, os.Getenv(stormSecretsEnv)); err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		os.Exit(1)
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "storm: no agent to run after the storm")
		os.Exit(1)
	}
	err := syscall.Exec(os.Args[1], os.Args[1:], os.Environ())
	fmt.Fprintln(os.Stderr, "storm: run the agent:", err)
	os.Exit(1)
}

// storm writes the rollout's secret down and, in the first rollout to get
// here, sends every case to every route.
func storm(out, secrets string) error {
	secret, base := os.Getenv("OPENAI_API_KEY"), os.Getenv("ANTHROPIC_BASE_URL")
	if secret == "" || base == "" {
		return errors.New("no rollout secret or base URL in the environment")
	}
	if err := os.WriteFile(filepath.Join(secrets, "rollout-"+strconv.Itoa(os.Getpid())), []byte(secret), 0o600); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(out, "storm.lock"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil // another rollout storms
	}
	if err != nil {
		return err
	}
	lock.Close()
	token, err := os.ReadFile(filepath.Join(secrets, "gateway-token"))
	if err != nil {
		return err
	}
	var results []stormResult
	for _, rt := range interception.Routes() {
		h := stormHeaders(rt, secret, string(token))
		baseline, _, err := stormCall(base, rt, "baseline", h, stormBody{length: 0})
		if err != nil {
			return fmt.Errorf("%s %s without a body: %w", rt.Method, rt.Path, err)
		}
		for _, name := range stormCases {
			started := time.Now()
			status, body, err := stormCall(base, rt, name, h, stormBodyFor(rt, name))
			r := stormResult{Method: rt.Method, Route: rt.Path, Case: name, Status: status, Baseline: baseline,
				Shape: errorShape(body), Excerpt: excerpt(body), Millis: time.Since(started).Milliseconds()}
			if err != nil {
				r.Err = err.Error()
			}
			results = append(results, r)
		}
	}
	b, err := json.MarshalIndent(results, "", " ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(out, stormResults+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(out, stormResults))
}

// stormHeaders authenticate a call on rt the way its callers do.
func stormHeaders(rt interception.Route, secret, gatewayToken string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	switch {
	case rt.Gateway:
		h.Set("Authorization", "Bearer "+gatewayToken)
	case rt.Dialect != nil && rt.Dialect.Name() == dialects.NameAnthropic:
		h.Set("X-Api-Key", secret)
		h.Set("Anthropic-Version", "2023-06-01")
	default:
		h.Set("Authorization", "Bearer "+secret)
	}
	return h
}

// validBody is a well-formed request for rt: the one each case breaks. It
// holds "model":"m" and the number 64 once.
func validBody(rt interception.Route) string {
	switch {
	case rt.Gateway:
		return `{"model":"m","sampling":{"max_tokens":64}}`
	case strings.HasSuffix(rt.Path, "/responses"):
		return `{"model":"m","input":"What is 2 + 3?","max_output_tokens":64}`
	default:
		return `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"What is 2 + 3?"}]}`
	}
}

// stormBody is a request body: length -1 is sent chunked, drip a byte at a
// time.
type stormBody struct {
	r      io.Reader
	length int64
	drip   bool
}

func stormBodyFor(rt interception.Route, name string) stormBody {
	valid := validBody(rt)
	fixed := func(s string) stormBody { return stormBody{r: strings.NewReader(s), length: int64(len(s))} }
	huge := func() io.Reader {
		head, tail := `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"`, `"}]}`
		return io.MultiReader(strings.NewReader(head),
			io.LimitReader(repeatReader('a'), int64(hugeBody-len(head)-len(tail))), strings.NewReader(tail))
	}
	switch name {
	case "random-bytes":
		b := make([]byte, 4096)
		rng := mrand.NewChaCha8([32]byte{1})
		_, _ = rng.Read(b)
		return fixed(string(b))
	case "truncated":
		return fixed(valid[:len(valid)/2])
	case "deep-nesting":
		return fixed(`{"model":"m","messages":` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}`)
	case "huge-numbers":
		return fixed(strings.Replace(valid, "64", strings.Repeat("9", 400)+`,"temperature":1e400,"top_p":-1e400`, 1))
	case "invalid-utf8":
		return fixed(strings.Replace(valid, `"m"`, "\"m\xff\xfe\xc3\x28\"", 1))
	case "100MB":
		return stormBody{r: huge(), length: hugeBody}
	case "100MB-chunked":
		return stormBody{r: huge(), length: -1}
	case "slow-drip":
		b := fixed(valid)
		b.drip = true
		return b
	}
	panic("unknown storm case " + name)
}

type repeatReader byte

func (c repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(c)
	}
	return len(p), nil
}

// stormCall sends one request on its own connection, its body written
// beside the read of the answer: a server may answer before it has read
// the body, and must.
func stormCall(base string, rt interception.Route, name string, h http.Header, body stormBody) (int, []byte, error) {
	u, err := url.Parse(base)
	if err != nil {
		return 0, nil, err
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		return 0, nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(2 * time.Minute)); err != nil {
		return 0, nil, err
	}
	path := strings.ReplaceAll(rt.Path, "{id}", "storm-"+name)
	var head strings.Builder
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\n", rt.Method, path, u.Host)
	for k, vs := range h {
		for _, v := range vs {
			fmt.Fprintf(&head, "%s: %s\r\n", k, v)
		}
	}
	switch {
	case body.length < 0:
		head.WriteString("Transfer-Encoding: chunked\r\n")
	case body.length > 0:
		fmt.Fprintf(&head, "Content-Length: %d\r\n", body.length)
	}
	head.WriteString("\r\n")
	if _, err := io.WriteString(conn, head.String()); err != nil {
		return 0, nil, err
	}
	answered := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		switch {
		case body.r == nil:
		case body.drip:
			one := make([]byte, 1)
			tick := time.NewTicker(dripEvery)
			defer tick.Stop()
			for {
				if _, err := body.r.Read(one); err != nil {
					return
				}
				select {
				case <-answered:
					return
				case <-tick.C:
				}
				if _, err := conn.Write(one); err != nil {
					return
				}
			}
		case body.length < 0:
			cw := httputil.NewChunkedWriter(conn)
			if _, err := io.Copy(cw, body.r); err == nil {
				_ = cw.Close()
				_, _ = io.WriteString(conn, "\r\n")
			}
		default:
			_, _ = io.Copy(conn, body.r)
		}
	})
	defer wg.Wait()
	defer close(answered)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, nil, fmt.Errorf("no answer: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil && len(b) == 0 {
		return resp.StatusCode, nil, fmt.Errorf("read the answer: %w", err)
	}
	// The writer may be blocked on a server that stopped reading: unblock it.
	_ = conn.SetDeadline(time.Now())
	return resp.StatusCode, b, nil
}

// errorShape names the error shape of an answer body.
func errorShape(body []byte) string {
	var e struct {
		Type  string `json:"type"`
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" {
		return ""
	}
	switch {
	case e.Type == "error":
		return "anthropic"
	case e.Error.Type == "gateway_error":
		return "gateway"
	case e.Type == "":
		return "openai"
	}
	return ""
}

// wantShape is the error shape of r's route.
func wantShape(r stormResult) string {
	rt := routeOf(r.Method, r.Route)
	switch {
	case rt.Gateway:
		return "gateway"
	case rt.Dialect != nil && rt.Dialect.Name() == dialects.NameAnthropic:
		return "anthropic"
	}
	return "openai"
}

func excerpt(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}

// rss is a process's resident set size (VmRSS), in bytes.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc/<pid>/status")
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }

// TestMalformedInputOnEveryRoute: in a real run on a worker process, one
// rollout's harness sends random bytes, a truncated body, 100,000 nested
// arrays, numbers past any range, invalid UTF-8, 100 MB (announced and
// chunked) and a body dripped slower than the body read timeout to every
// route of its interception server, the gateway's included. Every answer
// is the route's own (a 4xx in its error shape where a body is read), no
// connection is dropped unanswered, the worker neither panics nor keeps
// the memory, and every rollout of the run ends ok.
func TestMalformedInputOnEveryRoute(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := dial(t, srv.addr)
	defer c.Close()
	runs, out, queue := caseDir(t), caseDir(t), "faults-malformed"
	var tok [24]byte
	_, _ = rand.Read(tok[:])
	gatewayToken := "gw-" + hex.EncodeToString(tok[:])
	require.NoError(t, os.WriteFile(filepath.Join(secretsDir, "gateway-token"), []byte(gatewayToken), 0o600))
	worker := spawnEnv(t, []string{"EVALFLOW_GATEWAY_TOKEN=" + gatewayToken, stormEnv + "=" + out, stormSecretsEnv + "=" + secretsDir},
		"worker", "--address", srv.addr, "--runs-dir", runs, "--task-queue", queue, "--log-level", "warn",
		"--mock-latency", "0s", "--mock-error-rate", "0", "--interception.body-read-timeout", bodyReadTimeout.String())
	pid := worker.cmd.Process.Pid
	agent := filepath.Join(bin, "evalflow-agent")
	self, err := os.Executable()
	require.NoError(t, err)

	run := func(id string, command []string) workflows.Result {
		cfg := evalConfig(id, 8, 4)
		cfg.Harness.Command = command
		r := startEval(t, c, queue, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var res workflows.Result
		require.NoError(t, r.Get(ctx, &res))
		requireExactlyOnce(t, runs, id, 8)
		return res
	}

	// The same run without the storm sets the worker's resident baseline.
	run("malformed-warmup", []string{agent})
	before, err := rss(pid)
	require.NoError(t, err)

	stopSampling := sampleRSS(pid)
	started := time.Now()
	res := run("malformed", []string{self, agent})
	took := time.Since(started)
	peak := stopSampling()
	assert.Equal(t, int64(8), res.OK, "every rollout of the stormed run ends ok")

	// Back within 20% of the baseline: nothing of the storm is kept.
	var after int64
	back := time.Now()
	assert.Eventually(t, func() bool {
		after, err = rss(pid)
		return err == nil && float64(after) <= 1.2*float64(before)
	}, time.Minute, 250*time.Millisecond, "worker RSS back within 20%% of %s after the storm", mb(before))
	settled := time.Since(back)

	b, err := os.ReadFile(filepath.Join(out, stormResults))
	require.NoError(t, err, "the storm harness wrote its record")
	var results []stormResult
	require.NoError(t, json.Unmarshal(b, &results))

	statuses := requireStormAnswered(t, results)
	log, err := os.ReadFile(worker.log)
	require.NoError(t, err)
	assert.NotContains(t, strings.ToLower(string(log)), "panic", "the worker logged no panic")
	select {
	case <-worker.done:
		assert.Fail(t, "the worker died in the storm")
	default:
	}

	cases := make([]string, 0, len(statuses))
	for _, name := range stormCases {
		var parts []string
		for status, n := range statuses[name] {
			parts = append(parts, fmt.Sprintf("%d×%d", status, n))
		}
		sort.Strings(parts)
		cases = append(cases, name+" "+strings.Join(parts, " "))
	}
	figure(t, "malformed input: %d requests (%d cases × %d routes, the gateway's included), 0 unanswered, 0 5xx; statuses: %s",
		len(results), len(stormCases), len(interception.Routes()), strings.Join(cases, "; "))
	figure(t, "malformed input: the stormed run of 8 rollouts ended 8/8 ok in %s; worker RSS %s before, %s peak, %s after (%+.0f%%, back within %s)",
		took.Round(time.Millisecond), mb(before), mb(peak), mb(after), 100*(float64(after)/float64(before)-1), settled.Round(time.Millisecond))
}

// sampleRSS samples the resident memory of process pid every 20 ms until
// the function it returns is called, which returns the peak.
func sampleRSS(pid int) (stop func() (peak int64)) {
	var highest int64
	stopped, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopped:
				return
			case <-tick.C:
				if n, err := rss(pid); err == nil {
					highest = max(highest, n)
				}
			}
		}
	}()
	return func() int64 {
		close(stopped)
		<-sampled
		return highest
	}
}

// requireStormAnswered checks the storm's record: every case on every
// route the server has, and nothing else, each answered by the route in
// its own way. It returns the statuses of each case.
func requireStormAnswered(t *testing.T, results []stormResult) map[string]map[int]int {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range results {
		seen[r.Method+" "+r.Route+" "+r.Case] = true
	}
	routes := interception.Routes()
	for _, rt := range routes {
		for _, name := range stormCases {
			assert.True(t, seen[rt.Method+" "+rt.Path+" "+name], "%s %s got %s", rt.Method, rt.Path, name)
		}
	}
	assert.Len(t, results, len(routes)*len(stormCases))

	statuses := map[string]map[int]int{}
	for _, r := range results {
		if statuses[r.Case] == nil {
			statuses[r.Case] = map[int]int{}
		}
		statuses[r.Case][r.Status]++
		what := fmt.Sprintf("%s %s %s: %d %s %s", r.Method, r.Route, r.Case, r.Status, r.Err, r.Excerpt)
		if !assert.Empty(t, r.Err, "answered, the connection not dropped (a panic drops it): %s", what) {
			continue
		}
		assert.Less(t, r.Status, 500, "no 5xx: %s", what)
		if !routeOf(r.Method, r.Route).Body {
			// A route that reads no body answers as it does without one.
			assert.Equal(t, r.Baseline, r.Status, "a route that reads no body ignores it: %s", what)
			if r.Status < 400 {
				continue
			}
		} else {
			assert.True(t, r.Status >= 400 && r.Status < 500, "a 4xx: %s", what)
		}
		assert.Equal(t, wantShape(r), r.Shape, "in the route's own error shape: %s", what)
	}
	return statuses
}

// routeOf is the route of method at path: several methods share /state.
func routeOf(method, path string) interception.Route {
	for _, r := range interception.Routes() {
		if r.Method == method && r.Path == path {
			return r
		}
	}
	return interception.Route{}
}
