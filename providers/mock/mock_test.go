package mock_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/providers/mock"
)

const question = "What is 37 * (12 + 5)?"

func newServer(t *testing.T, cfg mock.Config) (*httptest.Server, openai.Client) {
	t.Helper()
	m, err := mock.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	client := openai.NewClient(
		option.WithBaseURL(srv.URL+"/v1/"),
		option.WithAPIKey("test-key"),
		option.WithMaxRetries(0),
	)
	return srv, client
}

var calculatorTool = openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
	Name: "calculator",
	Parameters: openai.FunctionParameters{
		"type":       "object",
		"properties": map[string]any{"expression": map[string]any{"type": "string"}},
		"required":   []string{"expression"},
	},
})

func params(tools bool, msgs ...openai.ChatCompletionMessageParamUnion) openai.ChatCompletionNewParams {
	p := openai.ChatCompletionNewParams{Model: "whatever", Messages: msgs}
	if tools {
		p.Tools = []openai.ChatCompletionToolUnionParam{calculatorTool}
	}
	return p
}

// stream runs a streaming call and returns the accumulated completion and
// the number of chunks that carried content.
func stream(t *testing.T, client openai.Client, p openai.ChatCompletionNewParams) (openai.ChatCompletion, int) {
	t.Helper()
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := client.Chat.Completions.NewStreaming(context.Background(), p)
	var acc openai.ChatCompletionAccumulator
	contentChunks := 0
	for s.Next() {
		c := s.Current()
		require.True(t, acc.AddChunk(c), "chunk rejected by the accumulator: %s", c.RawJSON())
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			contentChunks++
		}
	}
	require.NoError(t, s.Err())
	require.Len(t, acc.Choices, 1)
	return acc.ChatCompletion, contentChunks
}

func TestDirectAnswer(t *testing.T) {
	_, client := newServer(t, mock.Config{})
	p := params(false, openai.UserMessage(question))

	got, err := client.Chat.Completions.New(context.Background(), p)
	require.NoError(t, err)
	require.Len(t, got.Choices, 1)
	assert.Equal(t, "The answer is 629.", got.Choices[0].Message.Content)
	assert.Equal(t, "stop", got.Choices[0].FinishReason)
	assert.Equal(t, "mock", got.Model)
	assert.Equal(t, int64(6), got.Usage.PromptTokens, "ceil(22 chars / 4)")
	assert.Equal(t, int64(5), got.Usage.CompletionTokens, "ceil(18 chars / 4)")
	assert.Equal(t, int64(11), got.Usage.TotalTokens)

	streamed, chunks := stream(t, client, p)
	assert.Equal(t, "The answer is 629.", streamed.Choices[0].Message.Content)
	assert.Equal(t, "stop", streamed.Choices[0].FinishReason)
	assert.Greater(t, chunks, 1, "content should arrive in several chunks")
	assert.Equal(t, got.Usage.TotalTokens, streamed.Usage.TotalTokens)
}

func TestToolCallThenAnswer(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[streaming], func(t *testing.T) {
			_, client := newServer(t, mock.Config{})
			call := func(p openai.ChatCompletionNewParams) openai.ChatCompletion {
				if streaming {
					c, _ := stream(t, client, p)
					return c
				}
				c, err := client.Chat.Completions.New(context.Background(), p)
				require.NoError(t, err)
				return *c
			}

			p := params(true, openai.SystemMessage("Use the calculator."), openai.UserMessage(question))
			first := call(p)
			msg := first.Choices[0].Message
			assert.Equal(t, "tool_calls", first.Choices[0].FinishReason)
			require.Len(t, msg.ToolCalls, 1)
			tc := msg.ToolCalls[0]
			assert.Equal(t, "calculator", tc.Function.Name)
			assert.JSONEq(t, `{"expression":"37 * (12 + 5)"}`, tc.Function.Arguments)
			assert.NotEmpty(t, tc.ID)

			p.Messages = append(p.Messages, msg.ToParam(), openai.ToolMessage("629", tc.ID))
			second := call(p)
			assert.Equal(t, "The answer is 629.", second.Choices[0].Message.Content)
			assert.Equal(t, "stop", second.Choices[0].FinishReason)
		})
	}
}

func TestRawStream(t *testing.T) {
	srv, _ := newServer(t, mock.Config{})
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"What is 2 + 2?"}],` +
		`"tools":[{"type":"function","function":{"name":"calculator"}}]}`
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))

	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, line)
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, events)
	assert.Equal(t, "[DONE]", events[len(events)-1])
	argChunks := 0
	for _, e := range events {
		if strings.Contains(e, `"arguments":"`) && !strings.Contains(e, `"arguments":""`) {
			argChunks++
			assert.Contains(t, e, `"index":0`, "argument chunk without index: %s", e)
		}
	}
	assert.Greater(t, argChunks, 1, "tool-call arguments should be split across chunks")
	assert.Contains(t, events[len(events)-2], `"finish_reason":"tool_calls"`)
	for _, e := range events {
		assert.NotContains(t, e, `"usage"`, "usage sent without stream_options.include_usage")
	}
}

func TestDeterministic(t *testing.T) {
	_, client := newServer(t, mock.Config{ErrorRate: 0.5})
	wrong := 0
	for _, q := range []string{"1 + 1", "2 * 3", "10 - 4", "8 / 2", "7 * 7", "3 + 9", "100 - 1", "6 * 5", "9 / 3", "4 + 4"} {
		p := params(false, openai.UserMessage("What is "+q+"?"))
		a, err := client.Chat.Completions.New(context.Background(), p)
		require.NoError(t, err)
		b, err := client.Chat.Completions.New(context.Background(), p)
		require.NoError(t, err)
		assert.Equal(t, a.Choices[0].Message.Content, b.Choices[0].Message.Content, "same conversation, different answers")
		assert.Equal(t, a.ID, b.ID)
		if !strings.Contains(a.Choices[0].Message.Content, " is "+answerOf(q)+".") {
			wrong++
		}
	}
	assert.Greater(t, wrong, 0, "ErrorRate 0.5 gave no wrong answer in 10")
	assert.Less(t, wrong, 10, "ErrorRate 0.5 gave only wrong answers in 10")
}

func answerOf(q string) string {
	return map[string]string{
		"1 + 1": "2", "2 * 3": "6", "10 - 4": "6", "8 / 2": "4", "7 * 7": "49",
		"3 + 9": "12", "100 - 1": "99", "6 * 5": "30", "9 / 3": "3", "4 + 4": "8",
	}[q]
}

func TestErrorRateOne(t *testing.T) {
	_, client := newServer(t, mock.Config{ErrorRate: 1, Model: "tiny"})
	got, err := client.Chat.Completions.New(context.Background(), params(false, openai.UserMessage(question)))
	require.NoError(t, err)
	assert.Equal(t, "The answer is 630.", got.Choices[0].Message.Content)
	assert.Equal(t, "tiny", got.Model)

	p := params(true, openai.UserMessage(question))
	first, err := client.Chat.Completions.New(context.Background(), p)
	require.NoError(t, err)
	require.Len(t, first.Choices[0].Message.ToolCalls, 1, "tool calls are never made wrong")
	p.Messages = append(p.Messages, first.Choices[0].Message.ToParam(),
		openai.ToolMessage("629", first.Choices[0].Message.ToolCalls[0].ID))
	second, err := client.Chat.Completions.New(context.Background(), p)
	require.NoError(t, err)
	assert.Equal(t, "The answer is 630.", second.Choices[0].Message.Content)
}

func TestFallbackReply(t *testing.T) {
	_, client := newServer(t, mock.Config{})
	got, err := client.Chat.Completions.New(context.Background(), params(true, openai.UserMessage("Hello there")))
	require.NoError(t, err)
	assert.Empty(t, got.Choices[0].Message.ToolCalls)
	assert.Contains(t, got.Choices[0].Message.Content, "mock model")
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  mock.Config
		want string
	}{
		{"error rate", mock.Config{ErrorRate: 1.5}, "error rate"},
		{"negative latency", mock.Config{Latency: -1}, "negative latency"},
	}
	for _, tt := range tests {
		_, err := mock.New(tt.cfg)
		require.Error(t, err, tt.name)
		assert.Contains(t, err.Error(), tt.want, tt.name)
	}
}

func TestModels(t *testing.T) {
	_, client := newServer(t, mock.Config{Model: "mock-large"})
	page, err := client.Models.List(context.Background())
	require.NoError(t, err)
	require.Len(t, page.Data, 1)
	assert.Equal(t, "mock-large", page.Data[0].ID)
}

func TestHTTPErrors(t *testing.T) {
	srv, _ := newServer(t, mock.Config{})
	tests := []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/v1/chat/completions", "{not json", http.StatusBadRequest},
		{"POST", "/v1/chat/completions", `{"model":"m","messages":[]}`, http.StatusBadRequest},
		{"GET", "/v1/chat/completions", "", http.StatusMethodNotAllowed},
		{"POST", "/v1/models", "", http.StatusMethodNotAllowed},
		{"POST", "/v1/responses", "{not json", http.StatusBadRequest},
		{"POST", "/v1/messages", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, http.StatusBadRequest},
		{"GET", "/v1/messages", "", http.StatusMethodNotAllowed},
		{"POST", "/v1/embeddings", "{}", http.StatusNotFound},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, tt.status, resp.StatusCode, "%s %s", tt.method, tt.path)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), "%s %s", tt.method, tt.path)
	}
}

func TestLatencyGivesUpWithTheClient(t *testing.T) {
	m, err := mock.New(mock.Config{Latency: time.Hour})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequest("POST", "/v1/chat/completions",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)).WithContext(ctx)
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, req) // returns only because the request context is done
	assert.Empty(t, rec.Body.String(), "nothing is written for a client that went away")
}
