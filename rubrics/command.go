package rubrics

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The environment a command part's program gets, beside the worker's own.
const (
	// CommandWorkspaceEnv is the rollout's workspace directory on the
	// worker's host, "" for a task without one.
	CommandWorkspaceEnv = "EVALFLOW_WORKSPACE"
	// CommandTaskEnv is a file holding the task as JSON.
	CommandTaskEnv = "EVALFLOW_TASK_FILE"
	// CommandAnswerEnv is a file holding the final answer; the answer is on
	// the program's standard input too.
	CommandAnswerEnv = "EVALFLOW_ANSWER_FILE"
	// CommandTaskIDEnv is the task's id.
	CommandTaskIDEnv = "EVALFLOW_TASK_ID"
	// CommandStateEnv is a file holding the rollout's shared state (what
	// its tool servers and user left at {base}/state) as a JSON object.
	CommandStateEnv = "EVALFLOW_STATE_FILE"
	// CommandTranscriptEnv is a file holding the conversation (Input's
	// Transcript, the simulated user's turns included) as a JSON array of
	// {"role", "text"}.
	CommandTranscriptEnv = "EVALFLOW_TRANSCRIPT_FILE"
)

// DefaultCommandTimeout bounds a command part's run unless its spec says
// otherwise (command?timeout=30s:…).
const DefaultCommandTimeout = time.Minute

// commandOutputLimit bounds what is read of a command's stdout (its score)
// and kept of its stderr (for errors).
const commandOutputLimit = 64 << 10

// command is the part that runs a program to score the rollout: sh -c
// line, in the worker's working directory, with the workspace, the task
// and the answer in its environment (Command*Env) and the answer on stdin.
// It prints a number, or a JSON object of named numbers: its "reward", or
// the mean of its numbers when it has none; the numbers are the part's
// metrics.
type command struct {
	line    string
	timeout time.Duration
}

func buildCommand(a args) (scorer, error) {
	c := command{line: strings.TrimSpace(a.arg), timeout: DefaultCommandTimeout}
	if c.line == "" {
		return nil, errors.New("command: names no program: write command:PROGRAM")
	}
	if v, ok := a.options["timeout"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("command timeout %q is not a positive duration (30s, 5m)", v)
		}
		c.timeout = d
	}
	return c, nil
}

func (c command) score(parent context.Context, in Input) (Score, error) {
	dir, err := os.MkdirTemp("", "evalflow-rubric-*")
	if err != nil {
		return Score{}, &ScoringError{Reason: "cannot prepare the command's files", Err: err}
	}
	defer os.RemoveAll(dir)
	task, err := json.Marshal(in.Task)
	if err != nil {
		return Score{}, &ScoringError{Reason: "cannot write the task as JSON", Err: err}
	}
	taskFile, answerFile := filepath.Join(dir, "task.json"), filepath.Join(dir, "answer.txt")
	state := in.State
	if len(state) == 0 {
		state = []byte("{}")
	}
	transcript, err := json.Marshal(in.Transcript)
	if err != nil {
		return Score{}, &ScoringError{Reason: "cannot write the transcript as JSON", Err: err}
	}
	stateFile, transcriptFile := filepath.Join(dir, "state.json"), filepath.Join(dir, "transcript.json")
	if err := errors.Join(os.WriteFile(taskFile, task, 0o600), os.WriteFile(answerFile, []byte(in.Answer), 0o600),
		os.WriteFile(stateFile, state, 0o600), os.WriteFile(transcriptFile, transcript, 0o600)); err != nil {
		return Score{}, &ScoringError{Reason: "cannot prepare the command's files", Err: err}
	}

	ctx, cancel := context.WithTimeout(parent, c.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", c.line)
	env := in.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(slices.Clip(env),
		CommandWorkspaceEnv+"="+in.Workspace,
		CommandTaskEnv+"="+taskFile,
		CommandAnswerEnv+"="+answerFile,
		CommandTaskIDEnv+"="+in.Task.ID,
		CommandStateEnv+"="+stateFile,
		CommandTranscriptEnv+"="+transcriptFile,
	)
	cmd.Stdin = strings.NewReader(in.Answer)
	var stdout, stderr limitedBuffer
	stdout.limit, stderr.limit = commandOutputLimit, commandOutputLimit
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The program and whatever it started die together at the timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	switch {
	case parent.Err() != nil:
		return Score{}, &ScoringError{Reason: "stopped", Err: parent.Err()}
	case ctx.Err() != nil:
		return Score{}, &ScoringError{Reason: "timed out after " + c.timeout.String(), Stderr: stderr.String()}
	case err != nil:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return Score{}, &ScoringError{Reason: exit.String(), Stderr: stderr.String()}
		}
		return Score{}, &ScoringError{Reason: "cannot run " + strconv.Quote(c.line), Err: err}
	}
	s, err := parseCommandOutput(stdout.Bytes())
	if err != nil {
		return Score{}, &ScoringError{Reason: err.Error(), Stderr: stderr.String()}
	}
	return s, nil
}

// parseCommandOutput reads a command's score: a number, or a JSON object
// of named numbers.
func parseCommandOutput(out []byte) (Score, error) {
	text := strings.TrimSpace(string(out))
	if v, err := strconv.ParseFloat(text, 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
		return Score{Reward: v, Detail: "printed " + fmtNum(v)}, nil
	}
	garbage := fmt.Errorf("printed %q, not a number or a JSON object of named numbers", clipMiddle(text, 120))
	if !strings.HasPrefix(text, "{") {
		return Score{}, garbage
	}
	var named map[string]float64
	dec := json.NewDecoder(strings.NewReader(text))
	if err := dec.Decode(&named); err != nil || dec.More() || len(named) == 0 {
		return Score{}, garbage
	}
	s := Score{Metrics: named}
	if r, ok := named["reward"]; ok {
		s.Reward = r
		delete(named, "reward")
	} else {
		for _, v := range named {
			s.Reward += v
		}
		s.Reward /= float64(len(named))
	}
	if len(named) == 0 {
		s.Metrics = nil
	}
	shown := make([]string, 0, len(named))
	for _, name := range slices.Sorted(maps.Keys(named)) {
		shown = append(shown, name+" "+fmtNum(named[name]))
	}
	s.Detail = "printed reward " + fmtNum(s.Reward)
	if len(shown) > 0 {
		s.Detail = clip(s.Detail + " (" + strings.Join(shown, ", ") + ")")
	}
	return s, nil
}

// limitedBuffer keeps the first limit bytes written to it and drops the
// rest, so that a chatty program cannot fill the worker's memory.
type limitedBuffer struct {
	bytes.Buffer
	limit int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.limit - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

var _ io.Writer = (*limitedBuffer)(nil)
