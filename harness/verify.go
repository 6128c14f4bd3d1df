package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/evalflow/evalflow/tasksets"
)

// Files a verifier writes to its logs directory (/logs/verifier).
const (
	RewardText = "reward.txt"
	RewardJSON = "reward.json"
)

// rewardLimit bounds a reward file.
const rewardLimit = 64 << 10

// VerifySpec is one run of a task's verifier in a rollout's workspace,
// after the agent.
type VerifySpec struct {
	Key       string
	Workspace *Workspace
	// Tests is the host directory placed at /tests (read-only) for the
	// verifier only.
	Tests string
	// Command is run with sh -c in the workspace, e.g. "bash /tests/test.sh".
	Command string
	// Env is the task's verifier environment.
	Env map[string]string
	// Timeout kills the verifier and its process group; 0 is none.
	Timeout time.Duration
	// OutputLimit bounds the stdout and stderr tails kept, in bytes each.
	OutputLimit int
}

// VerifyResult is the reward a verifier wrote.
type VerifyResult struct {
	// Reward is reward.txt's number, or reward.json's "reward" (else the
	// mean of its numbers).
	Reward float64
	// Metrics are reward.json's named numbers (reward.txt: {"reward": n}).
	Metrics  map[string]float64
	ExitCode int
	// Stdout and Stderr are the tails of the verifier's output.
	Stdout, Stderr string
	Duration       time.Duration
	// RemovedHooks are files the agent planted where a test runner would
	// load them (a conftest.py above the tests, say), removed before the
	// verifier ran.
	RemovedHooks []string `json:",omitempty"`
}

// VerifierError is a verifier that produced no valid reward: it timed out,
// wrote none, or wrote garbage. It is a fault of the task's verifier (an
// infrastructure error of the rollout), never a reward of 0.
type VerifierError struct {
	// Reason is one short line: "timed out after 30s", "wrote no reward",
	// `reward.txt: "abc" is not a number`.
	Reason   string
	ExitCode int
	// Stdout and Stderr are the tails of the verifier's output.
	Stdout, Stderr string
	Duration       time.Duration
}

func (e *VerifierError) Error() string { return "verifier: " + e.Reason }

// Verifier runs task verifiers. Every runtime of evalflow's is one.
type Verifier interface {
	// Verify runs spec.Command in the workspace, with the tests at /tests,
	// and reads the reward it wrote. A verifier that yields no valid
	// reward is a *VerifierError; other errors are the runtime's. A
	// non-zero exit with a valid reward is a result.
	Verify(ctx context.Context, spec VerifySpec) (VerifyResult, error)
}

// ResetVerifierLogs empties the workspace's logs/verifier before a
// verifier runs and returns its host path: whatever the agent left there
// (a reward of its own, a link) must not count.
func ResetVerifierLogs(ws *Workspace) (string, error) {
	if err := os.MkdirAll(ws.Logs, 0o755); err != nil {
		return "", fmt.Errorf("verifier logs: %w", err)
	}
	dir := filepath.Join(ws.Logs, VerifierLogs)
	_ = RemoveAll(dir)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("verifier logs: %w", err)
	}
	return dir, nil
}

// VerifierPaths are the paths a verifier sees (on this host, or inside a
// sandbox).
type VerifierPaths struct {
	Tests        string // EVALFLOW_TESTS, when set
	Workspace    string // EVALFLOW_WORKSPACE
	Logs         string // EVALFLOW_LOGS
	VerifierLogs string // EVALFLOW_VERIFIER_LOGS
	Home         string // HOME, when set
}

// VerifierEnv is a verifier's environment: parent (os.Environ(), or nil in
// a sandbox) without credentials, the workspace's Dockerfile ENV, the
// paths p, then the task's verifier env.
func VerifierEnv(parent []string, spec VerifySpec, p VerifierPaths) []string {
	env := appendInherited(make([]string, 0, len(parent)+8+len(spec.Env)), parent)
	env = append(env, spec.Workspace.Env...)
	env = append(env,
		"EVALFLOW_WORKSPACE="+p.Workspace,
		"EVALFLOW_LOGS="+p.Logs,
		"EVALFLOW_VERIFIER_LOGS="+p.VerifierLogs,
	)
	if p.Tests != "" {
		env = append(env, "EVALFLOW_TESTS="+p.Tests)
	}
	if p.Home != "" {
		env = append(env, "HOME="+p.Home)
	}
	names := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		env = append(env, k+"="+spec.Env[k])
	}
	return dedupEnv(env)
}

// Verdict reads the reward a finished verifier wrote to dir (res is how
// its process ended, timeout its limit); a missing or invalid reward is a
// *VerifierError.
func Verdict(res Result, timeout time.Duration, dir string) (VerifyResult, error) {
	fail := func(reason string) (VerifyResult, error) {
		return VerifyResult{}, &VerifierError{Reason: reason, ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr, Duration: res.Duration}
	}
	if res.TimedOut {
		return fail(fmt.Sprintf("timed out after %v", timeout))
	}
	reward, metrics, err := readReward(dir)
	if err != nil {
		reason := err.Error()
		if errors.Is(err, errNoReward) && res.ExitCode != 0 {
			reason = fmt.Sprintf("exited with code %d and wrote no reward", res.ExitCode)
		}
		return fail(reason)
	}
	return VerifyResult{Reward: reward, Metrics: metrics, ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr, Duration: res.Duration}, nil
}

var errNoReward = errors.New("wrote no reward")

// readReward reads reward.txt (a number), or else reward.json (an object
// of named numbers). Its errors are one short line.
func readReward(dir string) (float64, map[string]float64, error) {
	b, err := readRewardFile(filepath.Join(dir, RewardText))
	switch {
	case err == nil:
		text := string(bytes.TrimSpace(b))
		v, err := strconv.ParseFloat(text, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, nil, fmt.Errorf("%s: %s is not a number", RewardText, quoteShort(text))
		}
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, nil, fmt.Errorf("%s: %s is not a finite number", RewardText, quoteShort(text))
		}
		return v, map[string]float64{"reward": v}, nil
	case !errors.Is(err, fs.ErrNotExist):
		return 0, nil, fmt.Errorf("%s: %w", RewardText, err)
	}
	b, err = readRewardFile(filepath.Join(dir, RewardJSON))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil, errNoReward
	case err != nil:
		return 0, nil, fmt.Errorf("%s: %w", RewardJSON, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || raw == nil {
		return 0, nil, fmt.Errorf("%s: not a JSON object of named numbers", RewardJSON)
	}
	metrics := map[string]float64{}
	for k, v := range raw {
		var n float64
		if json.Unmarshal(v, &n) == nil {
			metrics[k] = n
		} else if k == "reward" {
			return 0, nil, fmt.Errorf(`%s: "reward" is not a number`, RewardJSON)
		}
	}
	if len(metrics) == 0 {
		return 0, nil, fmt.Errorf("%s: holds no numbers", RewardJSON)
	}
	if r, ok := metrics["reward"]; ok {
		return r, metrics, nil
	}
	names := make([]string, 0, len(metrics))
	for k := range metrics {
		names = append(names, k)
	}
	sort.Strings(names)
	var sum float64
	for _, k := range names {
		sum += metrics[k]
	}
	return sum / float64(len(metrics)), metrics, nil
}

// readRewardFile reads a regular file of at most rewardLimit bytes; a
// link, a FIFO or a directory is refused.
func readRewardFile(path string) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		if fi.IsDir() {
			return nil, errors.New("is a directory")
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, errors.New("is a symbolic link")
		}
		return nil, errors.New("is " + tasksets.DescribeMode(fi.Mode()))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, rewardLimit+1))
	if err != nil {
		return nil, err
	}
	if len(b) > rewardLimit {
		return nil, fmt.Errorf("larger than %d KiB", rewardLimit>>10)
	}
	return b, nil
}

// quoteShort quotes s, cut to a few characters.
func quoteShort(s string) string {
	const n = 24
	if len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "…"
	}
	return strconv.Quote(s)
}
