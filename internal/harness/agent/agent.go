package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Exit codes of Main.
const (
	// ExitOK means the answer was written.
	ExitOK = 0
	// ExitError means the agent failed: bad environment, task file, or API error.
	ExitError = 1
	// ExitTurnLimit means the model was still calling tools after the
	// agent's own safety bound of calls (SafetyTurns), which only a server
	// that enforces no turn limit lets it reach.
	ExitTurnLimit = 2
	// ExitLimit means the interception server refused a call for one of
	// the rollout's limits (turns, tokens, model time): the server recorded
	// which, and the rollout is classified from that record.
	ExitLimit = 3
)

// DefaultMaxTurns is the rollout's turn limit assumed when
// EVALFLOW_MAX_TURNS is unset.
const DefaultMaxTurns = 8

// SafetyTurns is how many model calls the agent makes at most under a
// rollout limit of maxTurns (0: no bound). The interception server
// enforces the limit and refuses the call past it; the agent does not stop
// itself first, so that the rollout ends as limit:turns from the server's
// record. The bound only keeps it from looping forever against a server
// that enforces nothing.
func SafetyTurns(maxTurns int) int {
	if maxTurns <= 0 {
		return 0
	}
	return 2*maxTurns + 8
}

// limitCode is the error code of a call the interception server refused
// for a rollout limit.
const limitCode = "rollout_limit_reached"

// SystemPrompt is the default system prompt.
const SystemPrompt = "You are a careful assistant solving a task. " +
	"You work in a workspace directory: inspect and change it with the shell, read_file and " +
	"write_file tools, and run its tests or programs with shell. " +
	"Use the calculator tool for any arithmetic. " +
	"When you are done, reply with the final answer and nothing else."

// Dialects the agent speaks, each on its official SDK.
const (
	DialectChat      = "chat"
	DialectResponses = "responses"
	DialectAnthropic = "anthropic"
)

// errTurnLimit ends a conversation that used up its turns.
var errTurnLimit = errors.New("turn limit reached")

// env is the harness environment contract; see the package doc.
type env struct {
	baseURL    string
	apiKey     string
	model      string
	taskFile   string
	answerFile string
	maxTurns   int
}

// readEnv reads the environment; an anthropic agent reads the ANTHROPIC_
// variables, the others the OPENAI_ ones.
func readEnv(dialect string) (env, error) {
	prefix := "OPENAI_"
	if dialect == DialectAnthropic {
		prefix = "ANTHROPIC_"
	}
	e := env{
		baseURL:    os.Getenv(prefix + "BASE_URL"),
		apiKey:     os.Getenv(prefix + "API_KEY"),
		model:      os.Getenv(prefix + "MODEL"),
		taskFile:   os.Getenv("EVALFLOW_TASK_FILE"),
		answerFile: os.Getenv("EVALFLOW_ANSWER_FILE"),
		maxTurns:   DefaultMaxTurns,
	}
	for name, v := range map[string]string{
		prefix + "BASE_URL":    e.baseURL,
		prefix + "MODEL":       e.model,
		"EVALFLOW_TASK_FILE":   e.taskFile,
		"EVALFLOW_ANSWER_FILE": e.answerFile,
	} {
		if v == "" {
			return env{}, fmt.Errorf("%s is not set", name)
		}
	}
	if s := os.Getenv("EVALFLOW_MAX_TURNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return env{}, fmt.Errorf("EVALFLOW_MAX_TURNS=%q is not a non-negative integer", s)
		}
		e.maxTurns = n
	}
	return e, nil
}

// Main runs the agent. args are the arguments after the subcommand name; it
// reads the environment described in the package doc and returns the exit
// code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	noStream := fs.Bool("no-stream", false, "make non-streaming model calls")
	maxRetries := fs.Int("max-retries", 2, "SDK retries of a failed model call")
	system := fs.String("system", SystemPrompt, "system prompt")
	dialect := fs.String("dialect", DialectChat, "protocol to speak: chat, responses or anthropic")
	adversary := fs.String(adversaryFlag, "", "run one of the audit's adversaries instead of the model ("+strings.Join(Adversaries, ", ")+")")
	opts, envErr := toolOptionsFromEnv()
	fs.Func("tool-timeout", "how long one shell command may run, a duration or seconds "+
		"(default 60s, or EVALFLOW_TOOL_TIMEOUT)", opts.setTimeout)
	fs.Func("tool-output-limit", "bytes of a shell command's output the model reads, head and tail "+
		"(default 16384, or EVALFLOW_TOOL_OUTPUT_LIMIT)", opts.setOutputLimit)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitError
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "agent: unexpected argument %q\n", fs.Arg(0))
		return ExitError
	}
	if *adversary != "" {
		return runAdversary(ctx, *adversary, stdout, stderr)
	}

	if *dialect != DialectChat && *dialect != DialectResponses && *dialect != DialectAnthropic {
		fmt.Fprintf(stderr, "agent: --dialect %q: want chat, responses or anthropic\n", *dialect)
		return ExitError
	}
	if envErr != nil {
		fmt.Fprintf(stderr, "agent: %v\n", envErr)
		return ExitError
	}
	e, err := readEnv(*dialect)
	if err != nil {
		fmt.Fprintf(stderr, "agent: %v\n", err)
		return ExitError
	}
	dir, err := workspace()
	if err != nil {
		fmt.Fprintf(stderr, "agent: %v\n", err)
		return ExitError
	}
	tb := &tools{workspace: dir, timeout: opts.timeout, outputLimit: opts.outputLimit, env: commandEnv(os.Environ())}
	fail := func(err error) int {
		msg := err.Error()
		// The SDK's error text is only a status line; the server's own message
		// ("context length exceeded") is what a reader of the rollout needs.
		var apiErr *openai.Error
		if errors.As(err, &apiErr) && apiErr.Message != "" {
			msg += ": " + apiErr.Message
		}
		var anthErr *anthropic.Error
		if errors.As(err, &anthErr) && !strings.Contains(msg, anthErr.RawJSON()) {
			msg += ": " + anthErr.RawJSON()
		}
		// The secret must not leak even if the server's message quotes it.
		if e.apiKey != "" {
			msg = strings.ReplaceAll(msg, e.apiKey, "[redacted]")
		}
		fmt.Fprintf(stderr, "agent: %s\n", msg)
		return ExitError
	}

	t, err := readTask(e.taskFile)
	if err != nil {
		return fail(err)
	}
	msgs, err := conversation(*system, t)
	if err != nil {
		return fail(err)
	}
	a := &agent{session: newSession(*dialect, e, *maxRetries, msgs, !*noStream), tools: tb, out: stdout}
	u, err := startSide(ctx, t, a.session, tb, msgs, stderr)
	defer tb.mcp.close()
	if err != nil {
		return fail(err)
	}
	bound := SafetyTurns(e.maxTurns)
	answer, err := a.converse(ctx, bound, u)
	if errors.Is(err, errTurnLimit) {
		fmt.Fprintf(stderr, "agent: %v after %d turns\n", err, bound)
		return ExitTurnLimit
	}
	if isLimit(err) {
		fail(err)
		return ExitLimit
	}
	if err != nil {
		return fail(err)
	}
	if err := os.WriteFile(e.answerFile, []byte(answer), 0o644); err != nil {
		return fail(fmt.Errorf("write answer: %w", err))
	}
	return ExitOK
}

// isLimit reports whether err is the interception server's refusal of a
// call for a rollout limit: a 400 with code rollout_limit_reached.
func isLimit(err error) bool {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		return apiErr.StatusCode == 400 && (apiErr.Code == limitCode || strings.Contains(apiErr.RawJSON(), limitCode))
	}
	var anthErr *anthropic.Error
	if errors.As(err, &anthErr) {
		return anthErr.StatusCode == 400 && strings.Contains(anthErr.RawJSON(), "rollout limit reached")
	}
	return false
}

// newSession starts a conversation in dialect on its official SDK.
func newSession(dialect string, e env, maxRetries int, msgs []message, stream bool) session {
	switch dialect {
	case DialectAnthropic:
		client := anthropic.NewClient(
			aoption.WithBaseURL(e.baseURL),
			aoption.WithAPIKey(e.apiKey),
			aoption.WithMaxRetries(maxRetries),
		)
		return newAnthropicSession(client, e.model, msgs, stream)
	}
	client := openai.NewClient(
		option.WithBaseURL(e.baseURL),
		option.WithAPIKey(e.apiKey),
		option.WithMaxRetries(maxRetries),
	)
	if dialect == DialectResponses {
		return newResponsesSession(client, e.model, msgs, stream)
	}
	return newChatSession(client, e.model, msgs, stream)
}
