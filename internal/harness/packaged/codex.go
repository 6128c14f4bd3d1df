package packaged

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/evalflow/evalflow/harness"
)

// Codex is OpenAI's codex CLI. It talks to the slot through a model
// provider of its own declared in $CODEX_HOME/config.toml (the Responses
// API at the slot's /v1, the key from OPENAI_API_KEY), runs as `codex exec`
// with approvals and its own sandbox off — the runtime is the sandbox — and
// writes its last message to EVALFLOW_ANSWER_FILE. Its session files
// ($CODEX_HOME/sessions/…/rollout-*.jsonl) are kept.
var Codex = Harness{
	Name:    "codex",
	Package: "@openai/codex",
	Bin:     "codex",
	Version: "0.169.0",
	setup:   codexSetup,
	native: func(goarch string) string {
		arch, triple := "x64", "x86_64"
		if goarch == "arm64" {
			arch, triple = "arm64", "aarch64"
		}
		return "node_modules/@openai/codex-linux-" + arch + "/vendor/" + triple + "-unknown-linux-musl/bin/codex"
	},
	logs: []string{"codex-home/sessions"},
}

// codexScript runs codex exec with the answer file and prompt of the env
// contract, which only the harness's environment knows.
const codexScript = `exec "$@" --output-last-message "$EVALFLOW_ANSWER_FILE" -- "$EVALFLOW_PROMPT"`

func codexSetup(bin, session string, spec harness.Spec) ([]string, []string, error) {
	if err := checkSide("codex", spec.Task); err != nil {
		return nil, nil, err
	}
	home := filepath.Join(session, "codex-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, nil, err
	}
	// No secret here: the key stays in the environment (env_key).
	config := fmt.Sprintf(`# Written by evalflow: the rollout's interception slot as codex's model provider.
model = %s
model_provider = "evalflow"
check_for_update_on_startup = false

[model_providers.evalflow]
name = "evalflow interception"
base_url = %s
env_key = "OPENAI_API_KEY"
wire_api = "responses"
`, strconv.Quote(spec.Model), strconv.Quote(spec.BaseURL+"/v1")) + codexMCP(spec.Task)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		return nil, nil, err
	}
	command := []string{"sh", "-c", codexScript, "codex", bin, "exec",
		"--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "--color", "never"}
	env := []string{"CODEX_HOME=" + home, "HOME=" + filepath.Join(session, "home")}
	return command, env, os.MkdirAll(filepath.Join(session, "home"), 0o700)
}
