package packaged

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/evalflow/evalflow/harness"
)

// ClaudeCode is Anthropic's claude-code CLI. It talks to the slot through
// ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY of the env contract, runs as
// `claude -p` with permissions bypassed (the runtime is the sandbox) and
// non-essential traffic off, in a home and config directory of its own. Its
// JSON result (result.json) gives the final answer; its transcripts
// ($CLAUDE_CONFIG_DIR/projects/…/*.jsonl) and the result are kept.
var ClaudeCode = Harness{
	Name:    "claude-code",
	Package: "@anthropic-ai/claude-code",
	Bin:     "claude",
	Version: "2.1.330",
	setup:   claudeSetup,
	native: func(goarch string) string {
		arch := "x64"
		if goarch == "arm64" {
			arch = "arm64"
		}
		return "node_modules/@anthropic-ai/claude-code-linux-" + arch + "/claude"
	},
	answer: claudeAnswer,
	logs:   []string{"claude-config/projects", claudeResult},
}

// claudeResult is the file, in the session directory, of claude's JSON result.
const claudeResult = "result.json"

// claudeScript runs claude with its JSON result into $EVALFLOW_CLAUDE_RESULT,
// which is then printed as well, and claude's exit status.
const claudeScript = `"$@" >"$EVALFLOW_CLAUDE_RESULT"; s=$?; cat "$EVALFLOW_CLAUDE_RESULT"; exit $s`

func claudeSetup(bin, session string, spec harness.Spec) ([]string, []string, error) {
	if err := checkSide("claude-code", spec.Task); err != nil {
		return nil, nil, err
	}
	home, config := filepath.Join(session, "home"), filepath.Join(session, "claude-config")
	for _, dir := range []string{home, config} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, nil, err
		}
	}
	command := []string{"sh", "-c", claudeScript, "claude", bin, "-p",
		"--output-format", "json", "--dangerously-skip-permissions", "--model", spec.Model}
	if spec.MaxTurns > 0 {
		// The interception server enforces the rollout's turn limit and
		// records it; claude's own bound is only a safety net above it (as
		// the built-in agent's), so that claude never stops itself first
		// and the rollout ends as limit:turns.
		command = append(command, "--max-turns", strconv.Itoa(2*spec.MaxTurns+8))
	}
	mcpArgs, err := claudeMCP(session, spec.Task)
	if err != nil {
		return nil, nil, err
	}
	command = append(command, mcpArgs...)
	command = append(command, "--", harness.Prompt(spec.Task))
	env := []string{
		"HOME=" + home,
		"CLAUDE_CONFIG_DIR=" + config,
		"EVALFLOW_CLAUDE_RESULT=" + filepath.Join(session, claudeResult),
		"ANTHROPIC_SMALL_FAST_MODEL=" + spec.Model,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
		// Permissions may be bypassed as root only in a declared sandbox.
		"IS_SANDBOX=1",
	}
	return command, env, nil
}

// claudeAnswer is the result field of claude's JSON result.
func claudeAnswer(session string) (string, error) {
	b, err := os.ReadFile(filepath.Join(session, claudeResult))
	if err != nil {
		return "", err
	}
	var r struct {
		Result  string `json:"result"`
		IsError bool   `json:"is_error"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return "", fmt.Errorf("claude's JSON result: %w", err)
	}
	return r.Result, nil
}
