package mock_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/providers/mock"
)

// script is testdata/script.jsonl: a workspace task, a task that calls
// tools of other harnesses, and failures.
const script = "testdata/script.jsonl"

// turn is an assistant turn as a client decoded it, in no dialect.
type turn struct {
	text  string
	calls []call
}

type call struct {
	id, name, args string
}

// conversation is a conversation with the mock on the official SDK of one
// dialect.
type conversation interface {
	// send makes one call and returns the model's turn, keeping it only as
	// the last answer.
	send(t *testing.T) turn
	// reply adds the last answer and the results of its tool calls.
	reply(results ...string)
	// call makes one call without streaming and returns its error.
	call() error
}

type dialect struct {
	name string
	// start opens a conversation whose user message is prompt.
	start func(base, prompt string, stream bool) conversation
}

var dialects = []dialect{
	{"chat", newChat},
	{"responses", newResponses},
	{"anthropic", newAnthropic},
}

func serve(t *testing.T, cfg mock.Config) string {
	t.Helper()
	m, err := mock.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestScriptedTurnsInEveryDialect(t *testing.T) {
	for _, d := range dialects {
		for _, stream := range []bool{false, true} {
			t.Run(d.name+map[bool]string{false: " json", true: " stream"}[stream], func(t *testing.T) {
				base := serve(t, mock.Config{Script: script})
				c := d.start(base, "Task hello-file: create hello.txt holding a greeting, then show it.", stream)

				first := c.send(t)
				assert.Empty(t, first.text)
				require.Len(t, first.calls, 1)
				assert.Equal(t, "write_file", first.calls[0].name)
				assert.JSONEq(t, `{"path":"hello.txt","content":"hello, world\n"}`, first.calls[0].args)
				assert.Equal(t, first, c.send(t), "a retried call gets the same turn, ids included")

				c.reply("wrote 13 bytes to hello.txt")
				second := c.send(t)
				require.Len(t, second.calls, 2, "a turn may call several tools")
				assert.Equal(t, "shell", second.calls[0].name)
				assert.JSONEq(t, `{"command":"cat hello.txt"}`, second.calls[0].args)
				assert.Equal(t, "calculator", second.calls[1].name)
				assert.NotEqual(t, second.calls[0].id, second.calls[1].id)
				assert.NotEqual(t, first.calls[0].id, second.calls[0].id)

				c.reply("exit code: 0\noutput:\nhello, world\n", "2")
				final := c.send(t)
				assert.Empty(t, final.calls)
				assert.Equal(t, "hello.txt says hello, world.", final.text)

				c.reply()
				assert.Equal(t, final, c.send(t), "past the last turn the last one repeats")
			})
		}
	}
}

func TestScriptTurnByAssistantCount(t *testing.T) {
	_, client := newServer(t, mock.Config{Script: script})
	assistant := func(text string) openai.ChatCompletionMessageParamUnion { return openai.AssistantMessage(text) }
	tests := []struct {
		name string
		msgs []openai.ChatCompletionMessageParamUnion
		want string
	}{
		{"none yet", []openai.ChatCompletionMessageParamUnion{openai.UserMessage("count-turns")}, "one"},
		{"one", []openai.ChatCompletionMessageParamUnion{openai.UserMessage("count-turns"), assistant("one"),
			openai.UserMessage("go on")}, "two"},
		{"two", []openai.ChatCompletionMessageParamUnion{openai.UserMessage("count-turns"), assistant("one"),
			openai.UserMessage("go on"), assistant("two"), openai.UserMessage("go on")}, "three"},
		{"past the end", []openai.ChatCompletionMessageParamUnion{openai.UserMessage("count-turns"), assistant("one"),
			assistant("two"), assistant("three"), assistant("three")}, "three"},
		{"only those after the match count", []openai.ChatCompletionMessageParamUnion{openai.UserMessage("an example"),
			assistant("an example answer"), openai.UserMessage("count-turns")}, "one"},
		{"the match may be in an earlier user message", []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("count-turns"), assistant("one"), openai.UserMessage("<reminder>be brief</reminder>")}, "two"},
	}
	for _, tt := range tests {
		got, err := client.Chat.Completions.New(context.Background(), params(false, tt.msgs...))
		require.NoError(t, err, tt.name)
		assert.Equal(t, tt.want, got.Choices[0].Message.Content, tt.name)
	}
}

func TestScriptFirstMatchWinsAndFallback(t *testing.T) {
	_, client := newServer(t, mock.Config{Script: script})
	tests := []struct {
		prompt, want string
		calls        []string
	}{
		{"count-turns or Task hello-file: the first line wins", "", []string{"write_file"}},
		{"Run the claude-style task", "", []string{"Bash", "Write"}},
		{question, "", []string{"calculator"}},
		{"Hello there", "I am the mock model. Ask me an arithmetic question.", nil},
	}
	for _, tt := range tests {
		got, err := client.Chat.Completions.New(context.Background(), params(true, openai.UserMessage(tt.prompt)))
		require.NoError(t, err, tt.prompt)
		msg := got.Choices[0].Message
		var names []string
		for _, tc := range msg.ToolCalls {
			names = append(names, tc.Function.Name)
		}
		assert.Equal(t, tt.calls, names, "tools called for %q", tt.prompt)
		assert.Equal(t, tt.want, msg.Content, "answer to %q", tt.prompt)
	}
}

func TestScriptArguments(t *testing.T) {
	_, client := newServer(t, mock.Config{Script: script})
	got, err := client.Chat.Completions.New(context.Background(), params(false, openai.UserMessage("Run the claude-style task")))
	require.NoError(t, err)
	calls := got.Choices[0].Message.ToolCalls
	require.Len(t, calls, 2)
	assert.Equal(t, `{"command":"ls -la","description":"List files"}`, calls[0].Function.Arguments, "objects are sent compact")
	assert.Equal(t, `{"file_path": "/app/a.txt", "content": "`, calls[1].Function.Arguments, "strings are sent verbatim")

	got, err = client.Chat.Completions.New(context.Background(), params(false, openai.UserMessage("no-arguments")))
	require.NoError(t, err)
	require.Len(t, got.Choices[0].Message.ToolCalls, 1)
	assert.Equal(t, "{}", got.Choices[0].Message.ToolCalls[0].Function.Arguments)
}

func TestScriptedFailure(t *testing.T) {
	base := serve(t, mock.Config{Script: script})
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			c := d.start(base, "flaky upstream", false)
			err := c.call()
			var openaiErr *openai.Error
			var anthropicErr *anthropic.Error
			switch {
			case errors.As(err, &openaiErr):
				assert.Equal(t, http.StatusServiceUnavailable, openaiErr.StatusCode)
				assert.Contains(t, openaiErr.Message, "upstream overloaded")
			case errors.As(err, &anthropicErr):
				assert.Equal(t, http.StatusServiceUnavailable, anthropicErr.StatusCode)
				assert.Contains(t, anthropicErr.RawJSON(), "upstream overloaded")
			default:
				t.Fatalf("want an API error, got %v", err)
			}
		})
	}
}

func TestScriptErrors(t *testing.T) {
	tests := []struct {
		name, content, want string
	}{
		{"bad JSON", `{"match":"a","turns":[{"content":"b"}]}` + "\n\n" + `{"match":`, "bad.jsonl:3: unexpected EOF"},
		{"unknown field", `{"match":"a","turns":[{"content":"b"}]}` + "\n" + `{"match":"a","content":"b"}`,
			`bad.jsonl:2: json: unknown field "content"`},
		{"no match", `{"turns":[{"content":"b"}]}`, `bad.jsonl:1: no "match"`},
		{"no turns", `{"match":"a"}`, "bad.jsonl:1: no turns"},
		{"empty turn", `{"match":"a","turns":[{"content":"b"},{}]}`, "bad.jsonl:1: turn 2: neither content, tool_calls nor an error status"},
		{"unnamed call", `{"match":"a","turns":[{"tool_calls":[{"arguments":{}}]}]}`, "bad.jsonl:1: turn 1: tool call 1 has no name"},
		{"array arguments", `{"match":"a","turns":[{"tool_calls":[{"name":"x"},{"name":"y","arguments":[1]}]}]}`,
			"bad.jsonl:1: turn 1: tool call 2 (y): arguments must be a JSON object or a string"},
		{"bad status", `{"match":"a","turns":[{"status":99}]}`, "bad.jsonl:1: turn 1: status 99 is not an HTTP status"},
		{"error without status", `{"match":"a","turns":[{"content":"b","error":"c"}]}`, "bad.jsonl:1: turn 1: error without an error status"},
		{"two values", `{"match":"a","turns":[{"content":"b"}]} {}`, "bad.jsonl:1: more than one JSON value"},
		{"empty file", "\n\n", "bad.jsonl: no entries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.jsonl")
			require.NoError(t, os.WriteFile(path, []byte(tt.content), 0o644))
			_, err := mock.New(mock.Config{Script: path})
			require.Error(t, err)
			assert.Contains(t, err.Error(), path[:len(path)-len("bad.jsonl")]+tt.want)
		})
	}
	_, err := mock.New(mock.Config{Script: "testdata/missing.jsonl"})
	assert.ErrorContains(t, err, "testdata/missing.jsonl")
}

// chat is a chat completions conversation.
type chat struct {
	client openai.Client
	params openai.ChatCompletionNewParams
	stream bool
	last   openai.ChatCompletionMessage
}

func newChat(base, prompt string, stream bool) conversation {
	client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("k"), option.WithMaxRetries(0))
	return &chat{client: client, stream: stream, params: params(true, openai.UserMessage(prompt))}
}

func (c *chat) call() error {
	_, err := c.client.Chat.Completions.New(context.Background(), c.params)
	return err
}

func (c *chat) send(t *testing.T) turn {
	t.Helper()
	if c.stream {
		got, _ := stream(t, c.client, c.params)
		c.last = got.Choices[0].Message
	} else {
		got, err := c.client.Chat.Completions.New(context.Background(), c.params)
		require.NoError(t, err)
		c.last = got.Choices[0].Message
	}
	tr := turn{text: c.last.Content}
	for _, tc := range c.last.ToolCalls {
		tr.calls = append(tr.calls, call{tc.ID, tc.Function.Name, tc.Function.Arguments})
	}
	return tr
}

func (c *chat) reply(results ...string) {
	c.params.Messages = append(c.params.Messages, c.last.ToParam())
	for i, r := range results {
		c.params.Messages = append(c.params.Messages, openai.ToolMessage(r, c.last.ToolCalls[i].ID))
	}
}

// resp is a Responses conversation, stateless.
type resp struct {
	client openai.Client
	input  responses.ResponseInputParam
	stream bool
	last   *responses.Response
}

func newResponses(base, prompt string, stream bool) conversation {
	client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("k"), option.WithMaxRetries(0))
	return &resp{client: client, stream: stream, input: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage(prompt, responses.EasyInputMessageRoleUser),
	}}
}

func (c *resp) params() responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "m", Store: openai.Bool(false),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: c.input}}
}

func (c *resp) call() error {
	_, err := c.client.Responses.New(context.Background(), c.params())
	return err
}

func (c *resp) send(t *testing.T) turn {
	t.Helper()
	if c.stream {
		st := c.client.Responses.NewStreaming(context.Background(), c.params())
		c.last = nil
		for st.Next() {
			if ev := st.Current(); ev.Type == "response.completed" {
				r := ev.Response
				c.last = &r
			}
		}
		require.NoError(t, st.Err())
		require.NotNil(t, c.last, "stream without response.completed")
	} else {
		got, err := c.client.Responses.New(context.Background(), c.params())
		require.NoError(t, err)
		c.last = got
	}
	tr := turn{text: c.last.OutputText()}
	for _, item := range c.last.Output {
		if item.Type == "function_call" {
			fc := item.AsFunctionCall()
			tr.calls = append(tr.calls, call{fc.CallID, fc.Name, fc.Arguments})
		}
	}
	return tr
}

func (c *resp) reply(results ...string) {
	var calls []string
	for _, item := range c.last.Output {
		switch item.Type {
		case "function_call":
			fc := item.AsFunctionCall()
			c.input = append(c.input, responses.ResponseInputItemParamOfFunctionCall(fc.Arguments, fc.CallID, fc.Name))
			calls = append(calls, fc.CallID)
		case "message":
			c.input = append(c.input, responses.ResponseInputItemParamOfMessage(c.last.OutputText(), responses.EasyInputMessageRoleAssistant))
		}
	}
	for i, r := range results {
		out := responses.ResponseInputItemParamOfFunctionCallOutput(r)
		out.OfFunctionCallOutput.CallID = openai.String(calls[i])
		c.input = append(c.input, out)
	}
}

// anth is an Anthropic Messages conversation.
type anth struct {
	client anthropic.Client
	params anthropic.MessageNewParams
	stream bool
	last   *anthropic.Message
}

func newAnthropic(base, prompt string, stream bool) conversation {
	client := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey("k"), aoption.WithMaxRetries(0))
	return &anth{client: client, stream: stream, params: anthropic.MessageNewParams{
		Model: "m", MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
	}}
}

func (c *anth) call() error {
	_, err := c.client.Messages.New(context.Background(), c.params)
	return err
}

func (c *anth) send(t *testing.T) turn {
	t.Helper()
	if c.stream {
		st := c.client.Messages.NewStreaming(context.Background(), c.params)
		var acc anthropic.Message
		for st.Next() {
			require.NoError(t, acc.Accumulate(st.Current()))
		}
		require.NoError(t, st.Err())
		c.last = &acc
	} else {
		got, err := c.client.Messages.New(context.Background(), c.params)
		require.NoError(t, err)
		c.last = got
	}
	var tr turn
	for _, b := range c.last.Content {
		switch b.Type {
		case "text":
			tr.text += b.Text
		case "tool_use":
			tr.calls = append(tr.calls, call{b.ID, b.Name, string(b.Input)})
		}
	}
	return tr
}

func (c *anth) reply(results ...string) {
	c.params.Messages = append(c.params.Messages, c.last.ToParam())
	var blocks []anthropic.ContentBlockParamUnion
	k := 0
	for _, b := range c.last.Content {
		if b.Type == "tool_use" && k < len(results) {
			blocks = append(blocks, anthropic.NewToolResultBlock(b.ID, results[k], false))
			k++
		}
	}
	if len(blocks) == 0 {
		blocks = append(blocks, anthropic.NewTextBlock("go on"))
	}
	c.params.Messages = append(c.params.Messages, anthropic.NewUserMessage(blocks...))
}
