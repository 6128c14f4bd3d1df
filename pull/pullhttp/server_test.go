package pullhttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/chattemplate"
	"github.com/evalflow/evalflow/internal/chattemplate/vllmtest"
	"github.com/evalflow/evalflow/internal/devserver"
	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/harness/agent"
	"github.com/evalflow/evalflow/internal/logtest"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/pull"
	"github.com/evalflow/evalflow/pull/pullhttp"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trajectory"
	"github.com/evalflow/evalflow/workflows"
)

func TestMain(m *testing.M) {
	// The workers run the built-in agent as this test binary's "agent".
	agent.ServeIfAsked()
	os.Exit(m.Run())
}

const (
	token = "pull-token-0123456789abcdef"
	queue = "pull"
)

// cluster is an embedded Temporal server with one worker answering with
// the offline mock model.
type cluster struct {
	c       client.Client
	runsDir string
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	return newClusterOn(t, "")
}

// newClusterOn is newCluster with its worker's model at baseURL (…/v1);
// empty: the worker's own offline mock.
func newClusterOn(t *testing.T, baseURL string) *cluster {
	t.Helper()
	c := devtest.Dial(t, devtest.Start(t, devserver.Config{}))
	cl := &cluster{c: c, runsDir: t.TempDir()}
	w, err := wiring.NewWorker(c, wiring.Config{
		TaskQueue: queue, RunsDir: cl.runsDir, MaxRollouts: 16, BaseURL: baseURL,
		DefaultHarness: []string{os.Args[0], agent.Subcommand}, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	require.Equal(t, baseURL == "", w.UsingMock, "no provider configured: the offline mock answers")
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return cl
}

// startRun starts a pull run of tasks sample tasks, run by harness (nil:
// the built-in agent).
func (cl *cluster) startRun(t *testing.T, runID string, tasks int64, harness []string) {
	t.Helper()
	cl.startRunOf(t, runID, tasks, rollout.HarnessConfig{Command: harness})
}

// startRunOf starts a pull run of tasks sample tasks with harness h.
func (cl *cluster) startRunOf(t *testing.T, runID string, tasks int64, h rollout.HarnessConfig) {
	t.Helper()
	cfg := workflows.RunConfig{
		RunID: runID, Taskset: "sample", Tasks: tasks, RolloutsPerTask: 4, MaxConcurrent: 8,
		Seed: 7, Model: "mock", Harness: h,
	}
	_, err := pull.Start(context.Background(), cl.c, queue, cfg, workflows.TrainConfig{Epochs: 0})
	require.NoError(t, err)
}

// serve serves the pull API over cl on a loopback port.
func (cl *cluster) serve(t *testing.T, cfg pullhttp.Config) *httptest.Server {
	t.Helper()
	cfg.Token = token
	h, err := pullhttp.New(cl.c, cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// answer is one HTTP answer: its status, headers and JSON body.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) decode(t *testing.T, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(a.body, v), "body %s", a.body)
}

// apiError is the error body's content.
func (a answer) apiError(t *testing.T) (kind, message string) {
	t.Helper()
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	a.decode(t, &e)
	return e.Error.Type, e.Error.Message
}

// do sends one request with a plain net/http client.
func do(t *testing.T, ctx context.Context, method, url, auth, body string) (answer, error) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"), "every answer is JSON: %s", b)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// call sends an authorized request and fails the test on a transport error.
func call(t *testing.T, method, url, body string) answer {
	t.Helper()
	a, err := do(t, context.Background(), method, url, "Bearer "+token, body)
	require.NoError(t, err)
	return a
}

// TestPullAPIServesARun drives a pull run through the HTTP API alone:
// sample, run_group, run_rollout, progress with the task count, close.
func TestPullAPIServesARun(t *testing.T) {
	cl := newCluster(t)
	cl.startRun(t, "http-run", 6, nil)
	base := cl.serve(t, pullhttp.Config{}).URL + "/v1/pull/http-run/"

	a := call(t, "POST", base+"sample", "")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var first workflows.TaskRef
	a.decode(t, &first)
	require.Equal(t, workflows.TaskRef{RunID: "http-run", Position: 0, Epoch: 0, Index: first.Index}, first)
	require.Contains(t, string(a.body), `"position":0`, "snake_case fields")

	a = call(t, "POST", base+"run_group", `{"position": 0, "n": 3}`)
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var group workflows.GroupResult
	a.decode(t, &group)
	require.Equal(t, first, group.Ref)
	require.Len(t, group.Rollouts, 3)
	rewards := 0.0
	for k, s := range group.Rollouts {
		require.Equal(t, rollout.StatusOK, s.Status, "rollout %d: %+v", k, s)
		require.Equal(t, k, s.K)
		require.Equal(t, rollout.Key("http-run", 0, first.Index, k), s.Key)
		require.Positive(t, s.Turns, "the agent called the mock model")
		require.FileExists(t, filepath.Join(cl.runsDir, "http-run", s.Trace))
		rewards += s.Reward
	}
	require.Len(t, group.Group.Advantages, 3)
	require.InDelta(t, rewards/3, group.Group.Mean, 1e-9, "the group's mean is its rollouts' rewards'")

	a = call(t, "POST", base+"sample", "{}")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var second workflows.TaskRef
	a.decode(t, &second)
	require.Equal(t, int64(1), second.Position, "positions are handed out in order")

	a = call(t, "POST", base+"run_rollout", `{"position": 1}`)
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var one pull.Rollout
	a.decode(t, &one)
	require.Equal(t, second, one.Ref)
	require.Equal(t, rollout.StatusOK, one.Rollout.Status)
	require.Equal(t, rollout.Key("http-run", 0, second.Index, 0), one.Rollout.Key)
	require.GreaterOrEqual(t, one.Rollout.Reward, 0.0)
	require.LessOrEqual(t, one.Rollout.Reward, 1.0)

	a = call(t, "GET", base+"progress", "")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var pr workflows.PullProgress
	a.decode(t, &pr)
	require.Equal(t, workflows.PullProgress{
		RunID: "http-run", Sampled: 2, Groups: 2, Running: 0, Tasks: 6, TasksetLen: pr.TasksetLen,
	}, pr)
	require.Greater(t, pr.TasksetLen, int64(6), "the sample taskset holds more than the run's 6 tasks")
	require.Contains(t, string(a.body), `"taskset_len"`)

	a = call(t, "POST", base+"close", "")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	require.JSONEq(t, `{"run_id": "http-run", "closed": true}`, string(a.body))

	// The run has ended: pulling more is a conflict, not a missing run.
	a = call(t, "POST", base+"sample", "")
	require.Equal(t, http.StatusConflict, a.status, "%s", a.body)
	kind, msg := a.apiError(t)
	require.Equal(t, "closed", kind)
	require.Contains(t, msg, "http-run is closed")
	a = call(t, "POST", base+"run_group", `{"position": 0, "n": 2}`)
	require.Equal(t, http.StatusConflict, a.status, "%s", a.body)

	// Its progress stays readable.
	a = call(t, "GET", base+"progress", "")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	a.decode(t, &pr)
	require.True(t, pr.Closed)
	require.Equal(t, int64(2), pr.Groups)
}

// A run that traces tokens answers run_group and run_rollout with each
// rollout's trajectory (verifiers-shaped steps, the exact-prefix check)
// and its training samples as the request's view makes them.
func TestPullAPIServesTrainingSamples(t *testing.T) {
	cl := newCluster(t)
	cl.startRunOf(t, "samples-run", 4, rollout.HarnessConfig{TraceTokens: true})
	base := cl.serve(t, pullhttp.Config{}).URL + "/v1/pull/samples-run/"
	require.Equal(t, http.StatusOK, call(t, "POST", base+"sample", "").status)

	type answerOf struct {
		Rollouts     []rollout.Summary       `json:"rollouts"`
		Trajectories []trajectory.Trajectory `json:"trajectories"`
		Samples      [][]trajectory.Sample   `json:"samples"`
	}
	a := call(t, "POST", base+"run_group", `{"position": 0, "n": 2}`)
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var g answerOf
	a.decode(t, &g)
	require.Len(t, g.Trajectories, 2)
	require.Len(t, g.Samples, 2)
	for k, tr := range g.Trajectories {
		require.Len(t, tr.Steps, g.Rollouts[k].Turns, "a step per model call")
		require.Greater(t, len(tr.Steps), 1, "a multi-turn rollout: tool call, tool result, answer")
		require.True(t, tr.Interleavable, "the mock's tokenization extends each turn exactly")
		require.Len(t, g.Samples[k], 1, "the interleaved view is one sample")
		s := g.Samples[k][0]
		last := tr.Steps[len(tr.Steps)-1].Tokens
		require.Equal(t, append(append([]int32{}, last.PromptIDs...), last.CompletionIDs...),
			append(append([]int32{}, s.PromptIDs...), s.CompletionIDs...), "the sample is the last step's whole sequence")
		require.Len(t, s.CompletionMask, len(s.CompletionIDs))
		require.Len(t, s.CompletionLogprobs, len(s.CompletionIDs))
		require.Equal(t, make([]int, len(s.PromptIDs)), s.PromptMask)
		sampled := 0
		for _, st := range tr.Steps {
			sampled += len(st.Tokens.CompletionIDs)
		}
		ones := 0
		for _, m := range s.CompletionMask {
			ones += m
		}
		require.Equal(t, sampled, ones, "mask 1 on exactly the sampled tokens")
	}

	// The same group again, one sample per step: stored, not run again.
	a = call(t, "POST", base+"run_group", `{"position": 0, "n": 2, "view": "steps"}`)
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var per answerOf
	a.decode(t, &per)
	for k := range per.Samples {
		require.Len(t, per.Samples[k], len(per.Trajectories[k].Steps))
		require.True(t, per.Rollouts[k].Reused)
	}

	a = call(t, "POST", base+"run_rollout", `{"position": 0, "view": "steps"}`)
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var one struct {
		Trajectory *trajectory.Trajectory `json:"trajectory"`
		Samples    []trajectory.Sample    `json:"samples"`
	}
	a.decode(t, &one)
	require.NotNil(t, one.Trajectory)
	require.Len(t, one.Samples, len(one.Trajectory.Steps))

	for _, path := range []string{"run_group", "run_rollout"} {
		a = call(t, "POST", base+path, `{"position": 0, "n": 2, "view": "tokens"}`)
		if path == "run_rollout" {
			a = call(t, "POST", base+path, `{"position": 0, "view": "tokens"}`)
		}
		require.Equal(t, http.StatusBadRequest, a.status, "%s", a.body)
		_, msg := a.apiError(t)
		require.Contains(t, msg, `view "tokens": want "interleaved" or "steps"`)
	}
}

// TestPullAPIRefusesBadCalls checks the token, the bodies, and calls on runs
// that are not pull runs; a refused call changes nothing.
func TestPullAPIRefusesBadCalls(t *testing.T) {
	cl := newCluster(t)
	cl.startRun(t, "bad-calls", 4, nil)
	srv := cl.serve(t, pullhttp.Config{})
	base := srv.URL + "/v1/pull/bad-calls/"

	for _, auth := range []string{"", "Bearer wrong", "Bearer " + token + "x", token, "Basic " + token} {
		a, err := do(t, context.Background(), "POST", base+"sample", auth, "")
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, a.status, "Authorization %q", auth)
		kind, _ := a.apiError(t)
		require.Equal(t, "unauthorized", kind)
		require.NotContains(t, string(a.body), token, "the answer never holds the token")
	}

	a := call(t, "POST", base+"sample", "")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)

	bad := []struct {
		action, body, names string
	}{
		{"run_group", `{"position": "zero", "n": 2}`, "field position must be an integer"},
		{"run_group", `{"postion": 0, "n": 2}`, `unknown field "postion"`},
		{"run_group", `{"position": 0}`, "field n is required"},
		{"run_group", `{"position": 0, "n": 0}`, "field n = 0 is outside 1..256"},
		{"run_group", `{"position": 0, "n": 2.5}`, "field n must be an integer"},
		{"run_group", `{"position": -1, "n": 2}`, "field position = -1 is negative"},
		{"run_group", `{"position": 0, "n": 2`, "not valid JSON"},
		{"run_group", `[0, 2]`, "body must be a JSON object"},
		{"run_group", `{"position": 0, "n": 2} {}`, "data after the JSON object"},
		{"run_rollout", `{}`, "field position is required"},
		{"run_rollout", `not json`, "not valid JSON"},
		{"sample", `{"n": 1}`, `unknown field "n"`},
		// Checked by the run itself: a position it never handed out.
		{"run_group", `{"position": 99, "n": 2}`, "field position: position 99 was never sampled"},
		{"run_rollout", `{"position": 99}`, "never sampled"},
	}
	for _, b := range bad {
		a := call(t, "POST", base+b.action, b.body)
		require.Equal(t, http.StatusBadRequest, a.status, "%s %s: %s", b.action, b.body, a.body)
		kind, msg := a.apiError(t)
		require.Equal(t, "bad_request", kind)
		require.Contains(t, msg, b.names, "%s %s", b.action, b.body)
	}

	a = call(t, "GET", base+"sample", "")
	require.Equal(t, http.StatusMethodNotAllowed, a.status, "%s", a.body)
	require.Equal(t, "POST", a.header.Get("Allow"))
	a = call(t, "POST", base+"train", "")
	require.Equal(t, http.StatusNotFound, a.status, "%s", a.body)

	// Nothing refused reached the run: one sample, no group.
	a = call(t, "GET", base+"progress", "")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var pr workflows.PullProgress
	a.decode(t, &pr)
	require.Equal(t, int64(1), pr.Sampled)
	require.Zero(t, pr.Groups)

	for _, action := range []string{"sample", "close"} {
		a = call(t, "POST", srv.URL+"/v1/pull/no-such-run/"+action, "")
		require.Equal(t, http.StatusNotFound, a.status, "%s: %s", action, a.body)
		_, msg := a.apiError(t)
		require.Contains(t, msg, "no-such-run")
	}
	a = call(t, "GET", srv.URL+"/v1/pull/no-such-run/progress", "")
	require.Equal(t, http.StatusNotFound, a.status, "%s", a.body)

	// A run of another kind is not a pull run.
	_, err := cl.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: "an-eval", TaskQueue: queue, WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}, workflows.EvalName, workflows.EvalInput{Config: workflows.RunConfig{
		RunID: "an-eval", Taskset: "sample", Tasks: 1, Model: "mock",
	}})
	require.NoError(t, err)
	for _, r := range []struct{ method, action string }{{"GET", "progress"}, {"POST", "sample"}, {"POST", "close"}} {
		a = call(t, r.method, srv.URL+"/v1/pull/an-eval/"+r.action, "")
		require.Equal(t, http.StatusNotFound, a.status, "%s: %s", r.action, a.body)
		_, msg := a.apiError(t)
		require.Contains(t, msg, "not a pull run", r.action)
	}
}

// TestPullAPIHoldsLongCalls holds run_group until its rollouts finish: a
// caller that goes away cancels only its wait, the server's timeout answers
// 504, and calling again with the same position collects the rollouts.
func TestPullAPIHoldsLongCalls(t *testing.T) {
	cl := newCluster(t)
	gate := filepath.Join(t.TempDir(), "open")
	cl.startRun(t, "held", 4, []string{"sh", "-c",
		fmt.Sprintf(`while [ ! -e %q ]; do sleep 0.05; done; echo 7 > "$EVALFLOW_ANSWER_FILE"`, gate)})
	logs := &logtest.Buffer{}
	srv := cl.serve(t, pullhttp.Config{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	short := cl.serve(t, pullhttp.Config{CallTimeout: 2 * time.Second})
	for range 2 {
		require.Equal(t, http.StatusOK, call(t, "POST", srv.URL+"/v1/pull/held/sample", "").status)
	}

	// The server's timeout: 504, the rollouts keep running.
	a := call(t, "POST", short.URL+"/v1/pull/held/run_group", `{"position": 0, "n": 2}`)
	require.Equal(t, http.StatusGatewayTimeout, a.status, "%s", a.body)
	kind, msg := a.apiError(t)
	require.Equal(t, "timeout", kind)
	require.Contains(t, msg, "call again with the same position")

	// A caller that goes away: its request context cancels the wait.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := do(t, ctx, "POST", srv.URL+"/v1/pull/held/run_group", "Bearer "+token, `{"position": 1, "n": 2}`)
		done <- err
	}()
	progress := progressOf(srv.URL + "/v1/pull/held/progress")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		pr, err := progress()
		assert.NoError(c, err)
		assert.Equal(c, 2, pr.Running, "both calls' groups are running")
	}, time.Minute, 20*time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, logs.String(), "pull call abandoned by its caller")
	}, 10*time.Second, 10*time.Millisecond, "the handler stops waiting once its caller is gone")

	// Open the gate: both groups finish though nobody waits for them.
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		pr, err := progress()
		assert.NoError(c, err)
		assert.Equal(c, int64(2), pr.Groups)
		assert.Zero(c, pr.Running)
	}, time.Minute, 20*time.Millisecond)

	// Calling again with the same positions collects them: stored, not rerun.
	for pos := range 2 {
		a = call(t, "POST", srv.URL+"/v1/pull/held/run_group", fmt.Sprintf(`{"position": %d, "n": 2}`, pos))
		require.Equal(t, http.StatusOK, a.status, "%s", a.body)
		var group workflows.GroupResult
		a.decode(t, &group)
		require.Len(t, group.Rollouts, 2)
		for _, s := range group.Rollouts {
			require.Equal(t, rollout.StatusOK, s.Status, "%+v", s)
			require.True(t, s.Reused, "rollout %s was stored by the abandoned call", s.Key)
		}
	}
	require.NotContains(t, logs.String(), token, "no log line holds the token")
}

// TestPullAPIWithoutTemporal answers 503 with a retry hint when Temporal
// cannot be reached.
func TestPullAPIWithoutTemporal(t *testing.T) {
	c, err := client.NewLazyClient(client.Options{HostPort: devtest.FreeAddr(t), Logger: nil})
	require.NoError(t, err)
	defer c.Close()
	h, err := pullhttp.New(c, pullhttp.Config{Token: token, ReachTimeout: 500 * time.Millisecond})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, r := range []struct{ method, action, body string }{
		{"POST", "sample", ""}, {"POST", "run_group", `{"position": 0, "n": 2}`}, {"GET", "progress", ""},
	} {
		a := call(t, r.method, srv.URL+"/v1/pull/any/"+r.action, r.body)
		require.Equal(t, http.StatusServiceUnavailable, a.status, "%s: %s", r.action, a.body)
		require.Equal(t, "5", a.header.Get("Retry-After"))
		var e struct {
			Error struct {
				Type       string `json:"type"`
				RetryAfter int    `json:"retry_after_seconds"`
			} `json:"error"`
		}
		a.decode(t, &e)
		require.Equal(t, "unavailable", e.Error.Type)
		require.Equal(t, 5, e.Error.RetryAfter)
	}
}

func TestNewNeedsAToken(t *testing.T) {
	_, err := pullhttp.New(nil, pullhttp.Config{Token: " "})
	require.ErrorContains(t, err, "token is required")
}

// TestPythonExample runs examples/pull_http.py, standard library only,
// against the live API: it samples and runs groups as a trainer would.
func TestPythonExample(t *testing.T) {
	cl := newCluster(t)
	cl.startRun(t, "py-run", 8, nil)
	srv := cl.serve(t, pullhttp.Config{})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	lines := runExample(t, ctx, srv.URL, "pull_http.py", "--run-id", "py-run", "--groups", "2", "--n", "3")
	require.Len(t, lines, 3, "a line per group and a summary: %s", lines)
	var summary struct {
		Groups []struct {
			Position   int64     `json:"position"`
			Rewards    []float64 `json:"rewards"`
			Advantages []float64 `json:"advantages"`
		} `json:"groups"`
		Progress workflows.PullProgress `json:"progress"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[2]), &summary), "%s", lines[2])
	require.Len(t, summary.Groups, 2)
	for i, g := range summary.Groups {
		require.Equal(t, int64(i), g.Position)
		require.Len(t, g.Rewards, 3)
		require.Len(t, g.Advantages, 3)
	}
	require.Equal(t, int64(2), summary.Progress.Sampled)
	require.Equal(t, int64(2), summary.Progress.Groups)
	require.Equal(t, int64(8), summary.Progress.Tasks)

	// What the example printed is what the run holds.
	p, err := pull.New(cl.c, "py-run").Progress(ctx)
	require.NoError(t, err)
	require.Equal(t, summary.Progress, p)
}

// progressOf reads a run's progress from the API, for polling.
func progressOf(url string) func() (workflows.PullProgress, error) {
	return func() (workflows.PullProgress, error) {
		var pr workflows.PullProgress
		req, err := http.NewRequest("GET", url, nil)
		if err != nil {
			return pr, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return pr, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return pr, fmt.Errorf("progress: %s", resp.Status)
		}
		return pr, json.NewDecoder(resp.Body).Decode(&pr)
	}
}

// The GRPO-shaped trainer of examples/ runs against a pull run that traces
// tokens: it checks every sample's masks and exact-prefix flag, announces
// a policy version per step, and sees a group of the first version rerun
// on the current policy, or marked stale, as it asks.
func TestGRPOTrainerExample(t *testing.T) {
	cl := newCluster(t)
	srv := cl.serve(t, pullhttp.Config{})
	for _, onStale := range []string{"rerun", "mark"} {
		t.Run(onStale, func(t *testing.T) {
			runID := "grpo-" + onStale
			cl.startRunOf(t, runID, 16, rollout.HarnessConfig{TraceTokens: true})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			lines := runExample(t, ctx, srv.URL, "grpo_trainer.py", "--run-id", runID,
				"--steps", "3", "--groups", "2", "--n", "3", "--max-off-policy-steps", "1", "--on-stale", onStale)
			require.Len(t, lines, 4, "a line per step and a summary: %s", lines)
			var summary struct {
				Steps []struct {
					Loss        float64 `json:"loss"`
					GeneratedOn []int64 `json:"generated_on"`
					Now         int64   `json:"now"`
				} `json:"steps"`
				Samples       int `json:"samples"`
				Rollouts      int `json:"rollouts"`
				Interleavable int `json:"interleavable"`
				TrainedTokens int `json:"trained_tokens"`
				OldGroup      struct {
					MarkedStale     int     `json:"marked_stale"`
					OnCurrentPolicy int     `json:"on_current_policy"`
					OffPolicySteps  []int64 `json:"off_policy_steps"`
				} `json:"old_group"`
				PolicyVersion int64 `json:"policy_version"`
			}
			require.NoError(t, json.Unmarshal([]byte(lines[3]), &summary), "%s", lines[3])
			require.Len(t, summary.Steps, 3)
			for i, s := range summary.Steps {
				require.Equal(t, []int64{int64(i)}, s.GeneratedOn, "step %d's rollouts were generated on the version announced before it", i)
				require.Equal(t, int64(i+1), s.Now)
			}
			require.Equal(t, 3*2*3, summary.Rollouts)
			require.Equal(t, summary.Rollouts, summary.Interleavable, "the mock's turns extend each other exactly")
			require.Equal(t, summary.Rollouts, summary.Samples, "one interleaved sample per rollout")
			require.Positive(t, summary.TrainedTokens)
			require.Equal(t, int64(3), summary.PolicyVersion)
			if onStale == "rerun" {
				require.Equal(t, 3, summary.OldGroup.OnCurrentPolicy, "the stale group ran again on the current policy")
				require.Zero(t, summary.OldGroup.MarkedStale)
			} else {
				require.Equal(t, 3, summary.OldGroup.MarkedStale, "the stale group came back marked")
				require.Equal(t, []int64{3, 3, 3}, summary.OldGroup.OffPolicySteps)
			}

			// The run agrees: the version the trainer announced last.
			p, err := pull.New(cl.c, runID).Progress(ctx)
			require.NoError(t, err)
			require.NotNil(t, p.PolicyVersion)
			require.Equal(t, int64(3), *p.PolicyVersion)
		})
	}
}

// The GRPO-shaped trainer of examples/ against vLLM serving Qwen3's real
// chat template and tokenizer, with token-in: the model reasons, calls the
// calculator, reads the result and answers, and Qwen3's template drops the
// reasoning of every earlier turn when it renders the conversation again.
// The trainer's checks pass on every sample, each rollout is one
// exact-prefix sample whose later turns went in as tokens, and a group of
// equal rewards has advantages of 0.
func TestGRPOTrainerOnQwen3(t *testing.T) {
	script := []vllmtest.Entry{{Turns: []vllmtest.Turn{
		{Reasoning: "The calculator computes it.", ToolCalls: []vllmtest.ToolCall{{Name: "calculator", Arguments: json.RawMessage(`{"expression": "6 * 7"}`)}}},
		{Reasoning: "It says 42.", Content: "The answer is 42."},
	}}}
	up := vllmtest.Start(t, vllmtest.Config{Family: chattemplate.Qwen3, Script: script})
	cl := newClusterOn(t, up.BaseURL)
	srv := cl.serve(t, pullhttp.Config{})
	cfg := workflows.RunConfig{RunID: "grpo-qwen3", Taskset: "sample", Tasks: 16, RolloutsPerTask: 2, MaxConcurrent: 8,
		Seed: 7, Model: up.Model, Harness: rollout.HarnessConfig{TraceTokens: true, TokenIn: true}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := pull.Start(ctx, cl.c, queue, cfg, workflows.TrainConfig{Epochs: 0})
	require.NoError(t, err)

	lines := runExample(t, ctx, srv.URL, "grpo_trainer.py", "--run-id", cfg.RunID,
		"--steps", "2", "--groups", "2", "--n", "2", "--max-off-policy-steps", "1", "--on-stale", "rerun")
	require.Len(t, lines, 3, "a line per step and a summary: %s", lines)
	var summary struct {
		Steps []struct {
			Advantages [][]float64 `json:"advantages"`
		} `json:"steps"`
		Groups          int `json:"groups"`
		Rollouts        int `json:"rollouts"`
		Samples         int `json:"samples"`
		Interleavable   int `json:"interleavable"`
		TrajectorySteps int `json:"trajectory_steps"`
		TokenInSteps    int `json:"token_in_steps"`
		TrainedTokens   int `json:"trained_tokens"`
		OldGroup        struct {
			OnCurrentPolicy int `json:"on_current_policy"`
		} `json:"old_group"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[2]), &summary), "%s", lines[2])
	require.Equal(t, 2*2, summary.Groups)
	require.Equal(t, 2*2*2, summary.Rollouts)
	require.Equal(t, summary.Rollouts, summary.Interleavable, "every rollout's turns extend each other exactly")
	require.Equal(t, summary.Rollouts, summary.Samples, "one interleaved sample per rollout")
	require.Equal(t, 2*summary.Rollouts, summary.TrajectorySteps, "a tool call, then the answer")
	require.Equal(t, summary.Rollouts, summary.TokenInSteps, "each answer's prompt went in as tokens")
	require.Positive(t, summary.TrainedTokens)
	require.Len(t, summary.Steps, 2)
	for _, s := range summary.Steps {
		require.Equal(t, [][]float64{{0, 0}, {0, 0}}, s.Advantages, "the scripted model answers a task alike every time")
	}
	require.Equal(t, 2, summary.OldGroup.OnCurrentPolicy)
}

// runExample runs the Python example script of examples/ against the pull
// API at url and returns the lines it printed. python3 is required.
func runExample(t *testing.T, ctx context.Context, url, script string, args ...string) []string {
	t.Helper()
	python, err := exec.LookPath("python3")
	require.NoError(t, err, "python3 runs the documented examples (make setup installs it)")
	cmd := exec.CommandContext(ctx, python, append([]string{filepath.Join("..", "..", "examples", script)}, args...)...)
	cmd.Env = append(os.Environ(), "EVALFLOW_PULL_URL="+url, "EVALFLOW_PULL_TOKEN="+token)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s: stderr: %s", script, stderr.String())
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}
