package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/evalflow/evalflow/tasksets"
)

// userOutputLimit bounds what is read of a user command's reply.
const userOutputLimit = 64 << 10

// userTimeout bounds one user turn.
const userTimeout = 2 * time.Minute

// userMessage is one message of the conversation as a user simulator
// reads it.
type userMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// user is a task's simulated user: after each of the agent's answers it
// replies, until it says tasksets.UserDone, replies nothing, or has used
// its turns. Every turn is recorded at the interception server's /user,
// so that the rollout's trace holds it.
type user struct {
	spec     tasksets.User
	env      []string // a command's environment (sideEnv)
	baseURL  string   // EVALFLOW_BASE_URL; "" records nothing
	secret   string
	log      io.Writer
	messages []userMessage
	http     *http.Client
}

func newUser(spec tasksets.User, opening []message, env []string, log io.Writer) *user {
	u := &user{spec: spec, env: env, log: log, baseURL: os.Getenv("EVALFLOW_BASE_URL"),
		secret: os.Getenv(rolloutSecretEnv), http: &http.Client{Timeout: userTimeout}}
	for _, m := range opening {
		if m.role == "user" || m.role == "assistant" {
			u.messages = append(u.messages, userMessage{m.role, m.content})
		}
	}
	return u
}

// reply asks the user for its turn n after the agent's answer. done ends
// the conversation.
func (u *user) reply(ctx context.Context, n int, answer string) (text string, done bool, err error) {
	u.messages = append(u.messages, userMessage{"assistant", answer})
	if u.spec.Persona != "" {
		text, done, err = u.persona(ctx)
	} else {
		text, err = u.command(ctx, n)
		if err == nil {
			text, done = doneIn(text)
		}
	}
	if err != nil {
		return "", false, fmt.Errorf("user turn %d: %w", n, err)
	}
	if u.spec.Persona == "" {
		if err := u.record(ctx, text, done); err != nil {
			return "", false, fmt.Errorf("record user turn %d: %w", n, err)
		}
	}
	u.messages = append(u.messages, userMessage{"user", text})
	return text, done, nil
}

// doneIn takes the done marker out of a reply; an empty reply is done too.
func doneIn(reply string) (string, bool) {
	done := strings.Contains(reply, tasksets.UserDone)
	text := strings.TrimSpace(strings.ReplaceAll(reply, tasksets.UserDone, ""))
	return text, done || text == ""
}

// command runs the user's command for turn n: the conversation on stdin
// as JSON, the reply on stdout.
func (u *user) command(ctx context.Context, n int) (string, error) {
	in, err := json.Marshal(map[string]any{"turn": n, "messages": u.messages})
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, userTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, u.spec.Command[0], u.spec.Command[1:]...)
	cmd.Env = append(append([]string(nil), u.env...), "EVALFLOW_USER_TURN="+strconv.Itoa(n))
	cmd.Stdin = bytes.NewReader(in)
	var out bytes.Buffer
	cmd.Stdout = &limitWriter{w: &out, n: userOutputLimit}
	cmd.Stderr = u.log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("user command: %w", err)
	}
	return out.String(), nil
}

// persona asks the worker, through the interception server, for the
// reply of the task's persona to the conversation; the server records it.
func (u *user) persona(ctx context.Context) (string, bool, error) {
	if u.baseURL == "" {
		return "", false, errors.New("a persona user needs EVALFLOW_BASE_URL")
	}
	var got struct {
		Content string `json:"content"`
		Done    bool   `json:"done"`
	}
	if err := u.post(ctx, map[string]any{"messages": u.messages}, &got); err != nil {
		return "", false, err
	}
	return got.Content, got.Done, nil
}

// record posts a user turn to the interception server.
func (u *user) record(ctx context.Context, text string, done bool) error {
	if u.baseURL == "" {
		return nil
	}
	return u.post(ctx, map[string]any{"content": text, "done": done}, nil)
}

func (u *user) post(ctx context.Context, body any, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.baseURL+"/user", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+u.secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := u.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, userOutputLimit))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /user: %s: %s", resp.Status, bytes.TrimSpace(data))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// limitWriter keeps the first n bytes written to it and drops the rest.
type limitWriter struct {
	w io.Writer
	n int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	keep := min(len(p), l.n)
	if keep > 0 {
		if _, err := l.w.Write(p[:keep]); err != nil {
			return 0, err
		}
		l.n -= keep
	}
	return len(p), nil
}

// converse runs the agent and, with a user, alternates the agent's turns
// with the user's: each of the agent's answers gets the user's reply as
// the next user message, until the user is done or out of turns. Each
// stretch of the agent's has its own bound of model calls, maxTurns; the
// interception server bounds them all. The answer is the agent's last.
func (a *agent) converse(ctx context.Context, maxTurns int, u *user) (string, error) {
	answer, err := a.run(ctx, maxTurns)
	if err != nil || u == nil {
		return answer, err
	}
	for n := 1; n <= u.spec.Turns(); n++ {
		text, done, err := u.reply(ctx, n, answer)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(a.out, "user turn %d: %d chars%s\n", n, len(text), map[bool]string{true: ", done"}[done])
		if done {
			return answer, nil
		}
		say(a.session, answer, text)
		if answer, err = a.run(ctx, maxTurns); err != nil {
			return "", err
		}
	}
	return answer, nil
}

// say adds the agent's final answer and then the user's reply to a
// session's conversation.
func say(s session, answer, text string) {
	if answer == "" {
		answer = "(no answer)" // Anthropic refuses an empty text block
	}
	switch s := s.(type) {
	case *chatSession:
		s.params.Messages = append(s.params.Messages, openai.AssistantMessage(answer), openai.UserMessage(text))
	case *responsesSession:
		s.input = append(s.input,
			responses.ResponseInputItemParamOfMessage(answer, responses.EasyInputMessageRoleAssistant),
			responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser))
	case *anthropicSession:
		s.params.Messages = append(s.params.Messages,
			anthropic.NewAssistantMessage(anthropic.NewTextBlock(answer)),
			anthropic.NewUserMessage(anthropic.NewTextBlock(text)))
	}
}

// startSide starts what a task puts beside the agent: its tool servers,
// offered in the session, and its user. Stop the servers with close.
func startSide(ctx context.Context, t tasksets.Task, s session, tb *tools, opening []message, log io.Writer) (*user, error) {
	env := sideEnv(os.Environ())
	if len(t.Tools) > 0 {
		m, err := startMCP(ctx, t.Tools, env, log)
		if err != nil {
			return nil, err
		}
		tb.mcp = m
		m.offer(s)
	}
	if t.User == nil {
		return nil, nil
	}
	return newUser(*t.User, opening, env, log), nil
}
