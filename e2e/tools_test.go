package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/internal/logtest"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
	"github.com/evalflow/evalflow/tunnel"
	"github.com/evalflow/evalflow/tunnel/tunneltest"
	"github.com/evalflow/evalflow/workflows"
)

var (
	counterOnce sync.Once
	counterBin  string
	counterErr  error
)

// counterServer builds cmd/evalflow-mcp-counter once: the MCP tool server
// the tasks below give their agent.
func counterServer(t *testing.T) string {
	t.Helper()
	counterOnce.Do(func() {
		dir, err := os.MkdirTemp("", "evalflow-e2e-counter-")
		if err != nil {
			counterErr = err
			return
		}
		counterBin = filepath.Join(dir, "evalflow-mcp-counter")
		out, err := exec.Command("go", "build", "-o", counterBin, "../cmd/evalflow-mcp-counter").CombinedOutput()
		if err != nil {
			counterErr = fmt.Errorf("build the counter server: %v\n%s", err, out)
		}
	})
	require.NoError(t, counterErr)
	return counterBin
}

// writeFile writes content to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(content), mode))
	return p
}

// jsonLines is one JSON value a line.
func jsonLines(t *testing.T, values ...any) string {
	t.Helper()
	var b strings.Builder
	for _, v := range values {
		line, err := json.Marshal(v)
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// toolsRun is one eval of tasks with tool servers or a user.
type toolsRun struct {
	tasks, script, rubric string
	runtime               harness.Runtime // nil: local subprocesses
	tunnel                tunnel.Tunnel   // nil: loopback
}

// toolsResult is what a toolsRun left: the stored records and their
// traces by task id.
type toolsResult struct {
	res     workflows.Result
	records map[string]results.Record
	traces  map[string]trace.Rollout
}

func runTools(t *testing.T, c client.Client, queue string, r toolsRun) toolsResult {
	t.Helper()
	runsDir := t.TempDir()
	rt := r.runtime
	if rt == nil {
		rt = &local.Runtime{Dir: t.TempDir()}
	}
	logs := &logtest.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("worker log:\n%s", logs.String())
		}
	})
	startWorker(t, c, wiring.Config{
		TaskQueue: queue, RunsDir: runsDir, MaxRollouts: 4, Multiplex: 4,
		Runtime:      rt,
		Mock:         mock.Config{Script: r.script},
		Interception: wiring.Interception{Use: r.tunnel},
		Logger:       slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})

	runID := "tools-" + queue
	cfg := workflows.RunConfig{RunID: runID, Taskset: r.tasks, MaxConcurrent: 4, Model: "mock", Rubric: r.rubric,
		Harness: rollout.HarnessConfig{MaxTurns: 12}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: runID, TaskQueue: queue}, wiring.EvalWorkflowName, workflows.EvalInput{Config: cfg})
	require.NoError(t, err)
	out := toolsResult{records: map[string]results.Record{}, traces: map[string]trace.Rollout{}}
	require.NoError(t, run.Get(ctx, &out.res))
	store := storetest.Files(t, runsDir)
	for _, rec := range mustList(t, store, runID) {
		out.records[rec.TaskID] = rec
		out.traces[rec.TaskID] = readTrace(t, store.Dir(runID), rec)
	}
	return out
}

// counterState is what the counter server keeps in a rollout's state.
type counterState struct {
	Counter int `json:"counter"`
	PID     int `json:"pid"`
}

func stateOf(t *testing.T, tr trace.Rollout) counterState {
	t.Helper()
	require.NotEmpty(t, tr.State, "the trace keeps the rollout's state")
	var s counterState
	require.NoError(t, json.Unmarshal(tr.State, &s))
	return s
}

// requireGone fails unless process pid has ended (gone, or a zombie
// waiting to be reaped).
func requireGone(t *testing.T, pid int, what string) {
	t.Helper()
	require.NotZero(t, pid, what)
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		// pid (comm) STATE …: the comm may hold spaces, the state follows its ')'.
		s := string(b)
		state := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
		return state == "Z" || state == "X"
	}, 10*time.Second, 10*time.Millisecond, "%s (pid %d) is still running after the rollout", what, pid)
}

// counterTasks are three tasks with the counter server: one the agent
// counts to three in over stdio, one over streamable HTTP, and one whose
// model call fails after one increment.
func counterTasks(t *testing.T, dir string) (tasks, script, rubric string) {
	bin := counterServer(t)
	tools := []map[string]any{{"name": "counter", "command": []string{bin}}}
	port := devtest.FreePort(t)
	httpTools := []map[string]any{{"name": "counter", "transport": "http", "port": port,
		"command": []string{bin, "--http", fmt.Sprintf("127.0.0.1:%d", port)}}}
	tasks = writeFile(t, dir, "tasks.jsonl", jsonLines(t,
		map[string]any{"id": "count", "prompt": "Count to three with the counter tool.", "tools": tools},
		map[string]any{"id": "count-http", "prompt": "Count to three with the counter tool, over HTTP.", "tools": httpTools},
		map[string]any{"id": "count-then-fail", "prompt": "Count once, then fail.", "tools": tools},
	), 0o644)
	increment := map[string]any{"tool_calls": []map[string]any{{"name": "counter__increment", "arguments": map[string]any{}}}}
	script = writeFile(t, dir, "script.jsonl", jsonLines(t,
		map[string]any{"match": "Count to three", "turns": []any{increment, increment, increment,
			map[string]any{"content": "The counter is at 3."}}},
		map[string]any{"match": "Count once, then fail", "turns": []any{increment,
			map[string]any{"status": 400, "error": "the model refuses this request"}}},
	), 0o644)
	// A state-aware rubric: 1 when the state the tool server left says 3.
	check := writeFile(t, dir, "check.sh", "#!/bin/sh\n"+`grep -q '"counter":3' "$EVALFLOW_STATE_FILE" && echo 1 || echo 0`+"\n", 0o755)
	return tasks, script, "command:" + check
}

// TestToolServerKeepsCounterInState: a task's stdio MCP tool server (the
// counter, on the official Go SDK), called three times by the built-in
// agent (its MCP client, on the same SDK) as the scripted model asks,
// keeps its counter in the rollout's /state; the trace holds the state,
// the rubric reads it, and the server is gone after the rollout — also
// after one that failed.
func TestToolServerKeepsCounterInState(t *testing.T) {
	t.Parallel()
	_, c := devtest.StartEvalflow(t)
	tasks, script, rubric := counterTasks(t, t.TempDir())
	out := runTools(t, c, "tools-local", toolsRun{tasks: tasks, script: script, rubric: rubric})

	rec, tr := out.records["count"], out.traces["count"]
	require.Equal(t, rollout.StatusOK, rec.Status, "%+v", rec)
	assert.Equal(t, 1.0, rec.Reward, "the rubric read the counter from the state")
	assert.Len(t, tr.Turns, 4, "three tool calls and the answer")
	st := stateOf(t, tr)
	assert.Equal(t, 3, st.Counter)
	for i, turn := range tr.Turns[1:] {
		assert.Contains(t, turn.Request.Messages[len(turn.Request.Messages)-1].Text(), fmt.Sprintf(`"counter":%d`, i+1),
			"the tool's answer reached the model")
	}
	requireGone(t, st.PID, "the tool server of a finished rollout")

	hrec, htr := out.records["count-http"], out.traces["count-http"]
	require.Equal(t, rollout.StatusOK, hrec.Status, "%+v", hrec)
	assert.Equal(t, 1.0, hrec.Reward, "the HTTP server's counter")
	hst := stateOf(t, htr)
	assert.Equal(t, 3, hst.Counter)
	requireGone(t, hst.PID, "the HTTP tool server of a finished rollout")

	failed, ftr := out.records["count-then-fail"], out.traces["count-then-fail"]
	assert.Equal(t, rollout.StatusError, failed.Status)
	assert.Equal(t, rollout.KindHarnessExit, failed.ErrorKind)
	fst := stateOf(t, ftr)
	assert.Equal(t, 1, fst.Counter)
	requireGone(t, fst.PID, "the tool server of a failed rollout")
	assert.NotEqual(t, st.PID, fst.PID, "each rollout starts its own server")
}

// TestUserSimulatorTakesTurns: a task's scripted user replies to each of
// the agent's answers, three turns, the last saying it is done; the
// trace records them as user turns and the rubric sees the conversation
// they made.
func TestUserSimulatorTakesTurns(t *testing.T) {
	t.Parallel()
	_, c := devtest.StartEvalflow(t)
	dir := t.TempDir()
	userScript := writeFile(t, dir, "user.sh", `cat > /dev/null
case "$EVALFLOW_USER_TURN" in
1) echo "Now add 10." ;;
2) echo "Now double it." ;;
*) echo "Thanks, that is all. [DONE]" ;;
esac
`, 0o755)
	tasks := writeFile(t, dir, "tasks.jsonl", jsonLines(t,
		map[string]any{"id": "talk", "prompt": "Let us talk: what is 2+2?", "user": map[string]any{"command": []string{"sh", userScript}}},
	), 0o644)
	script := writeFile(t, dir, "script.jsonl", jsonLines(t,
		map[string]any{"match": "what is 2+2", "turns": []any{
			map[string]any{"content": "4"}, map[string]any{"content": "14"}, map[string]any{"content": "28"}}},
	), 0o644)
	// 1 when the transcript holds the prompt and both user turns that
	// reached the agent, and its last answer.
	check := writeFile(t, dir, "check.sh", `#!/bin/sh
t="$EVALFLOW_TRANSCRIPT_FILE"
users=$(grep -o '"role":"user"' "$t" | wc -l)
if [ "$users" -eq 3 ] && grep -q 'Now add 10.' "$t" && grep -q 'Now double it.' "$t" && grep -q '"text":"28"' "$t"; then echo 1; else echo 0; fi
`, 0o755)
	out := runTools(t, c, "tools-user", toolsRun{tasks: tasks, script: script, rubric: "command:" + check})

	rec, tr := out.records["talk"], out.traces["talk"]
	require.Equal(t, rollout.StatusOK, rec.Status, "%+v", rec)
	assert.Equal(t, 1.0, rec.Reward, "the rubric saw the whole conversation")
	assert.Len(t, tr.Turns, 3, "one model call per answer")
	assert.Equal(t, "28", tr.Harness.Answer, "the agent's last answer")
	require.Len(t, tr.Users, 3, "three user turns recorded")
	for i, want := range []string{"Now add 10.", "Now double it.", "Thanks, that is all."} {
		assert.Equal(t, i+1, tr.Users[i].Index)
		assert.Equal(t, want, tr.Users[i].Content)
		assert.Equal(t, i+1, tr.Users[i].AfterTurn, "user turn %d follows the agent's answer %d", i+1, i+1)
		assert.Equal(t, i == 2, tr.Users[i].Done)
	}
	last := tr.Turns[2].Request.Messages
	assert.Equal(t, "user", last[len(last)-1].Role)
	assert.Equal(t, "Now double it.", last[len(last)-1].Text(), "the user's reply reached the model as a user message")
}

// TestToolServerInNetnsReachesStateThroughFRP: the harness and its tool
// server run in a network namespace that reaches this host only through
// frp; the server reaches the rollout's /state at the one base URL the
// tunnel gives, and the counter lands in the trace.
func TestToolServerInNetnsReachesStateThroughFRP(t *testing.T) {
	_, c := devtest.StartEvalflow(t)
	n := newNetns(t, "10.213.20.0")
	frps := tunneltest.StartFRPSOn(t, n.HostIP)
	tun := &tunnel.FRP{ServerAddr: frps.Addr, ServerPort: frps.Port, Token: frps.Token}
	tasks, script, rubric := counterTasks(t, t.TempDir())
	rt := newRemoteRuntime(n)
	out := runTools(t, c, "tools-netns", toolsRun{tasks: tasks, script: script, rubric: rubric, runtime: rt, tunnel: tun})

	rec, tr := out.records["count"], out.traces["count"]
	require.Equal(t, rollout.StatusOK, rec.Status, "%+v", rec)
	assert.Equal(t, 1.0, rec.Reward)
	st := stateOf(t, tr)
	assert.Equal(t, 3, st.Counter, "the server in the namespace wrote the state through the tunnel")
	requireGone(t, st.PID, "the tool server in the namespace")
	for _, u := range rt.baseURLs() {
		assert.NotContains(t, u, "127.0.0.1", "the harness was handed the tunnel's URL, not loopback")
	}
}

// TestPersonaUserTakesTurns: a task's user is an LLM persona the worker
// runs through its provider with the task's prompt template; the agent
// asks it for each turn at /user, and the trace keeps its turns with the
// model call behind each.
func TestPersonaUserTakesTurns(t *testing.T) {
	t.Parallel()
	_, c := devtest.StartEvalflow(t)
	dir := t.TempDir()
	persona := "You play a student who asked: {{prompt}}\n\nThe conversation so far:\n{{conversation}}\n\nReply as the student; say [DONE] when satisfied."
	tasks := writeFile(t, dir, "tasks.jsonl", jsonLines(t,
		map[string]any{"id": "persona", "prompt": "Let us talk: what is 2+2?", "answer": "14", "user": map[string]any{"persona": persona}},
	), 0o644)
	// The persona's calls hold the conversation written out; the agent's
	// hold the prompt as a user message. The first entry that matches wins.
	script := writeFile(t, dir, "script.jsonl", jsonLines(t,
		map[string]any{"match": "assistant: 14", "turns": []any{map[string]any{"content": "Thanks! [DONE]"}}},
		map[string]any{"match": "assistant: 4", "turns": []any{map[string]any{"content": "Now add 10."}}},
		map[string]any{"match": "what is 2+2", "turns": []any{map[string]any{"content": "4"}, map[string]any{"content": "14"}}},
	), 0o644)
	out := runTools(t, c, "tools-persona", toolsRun{tasks: tasks, script: script})

	rec, tr := out.records["persona"], out.traces["persona"]
	require.Equal(t, rollout.StatusOK, rec.Status, "%+v", rec)
	assert.Len(t, tr.Turns, 2, "the agent's model calls only")
	assert.Equal(t, "14", tr.Harness.Answer)
	require.Len(t, tr.Users, 2)
	assert.Equal(t, "Now add 10.", tr.Users[0].Content)
	assert.False(t, tr.Users[0].Done)
	assert.Equal(t, "Thanks!", tr.Users[1].Content)
	assert.True(t, tr.Users[1].Done)
	for _, u := range tr.Users {
		require.NotNil(t, u.Call, "the persona's model call is kept")
		assert.Equal(t, "user", u.Call.Route)
		assert.Contains(t, u.Call.Request.Messages[0].Text(), "You play a student who asked: Let us talk: what is 2+2?", "the template got the task's prompt")
	}
	assert.Contains(t, tr.Users[1].Call.Request.Messages[0].Text(), "user: Now add 10.", "the template got the conversation")
}
