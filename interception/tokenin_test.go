package interception_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/internal/logtest"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/trace"
)

// upstreamCall is a call an upstream got.
type upstreamCall struct {
	path string
	body []byte
}

// calls keeps every call an upstream got, and can answer some paths with
// a status of its own instead of the mock's.
type calls struct {
	mu     sync.Mutex
	seen   []upstreamCall
	status map[string]int // path: status to answer
}

func (c *calls) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.seen = append(c.seen, upstreamCall{r.URL.Path, data})
		status := c.status[r.URL.Path]
		c.mu.Unlock()
		if status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"error": {"message": "not here", "type": "invalid_request_error"}}`))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(data))
		next.ServeHTTP(w, r)
	})
}

// paths are the paths of the calls so far.
func (c *calls) paths() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range c.seen {
		out = append(out, s.path)
	}
	return out
}

func (c *calls) lastTo(path string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.seen) - 1; i >= 0; i-- {
		if c.seen[i].path == path {
			return c.seen[i].body
		}
	}
	return nil
}

// tokenInRig is a pool in front of the mock model in merge mode, whose
// re-tokenization of a conversation differs from the ids it sampled.
type tokenInRig struct {
	pool *interception.Pool
	up   *calls
}

func newTokenInRig(t *testing.T, status map[string]int, mutate ...func(*interception.Config)) tokenInRig {
	t.Helper()
	m, err := mock.New(mock.Config{TokenMerge: true})
	require.NoError(t, err)
	up := &calls{status: status}
	srv := httptest.NewServer(up.wrap(m))
	t.Cleanup(srv.Close)
	client := providers.NewOpenAI(srv.URL+"/v1", "upstream-key")
	client.BaseDelay, client.MaxDelay = time.Millisecond, time.Millisecond
	cfg := interception.Config{Upstream: client}
	for _, m := range mutate {
		m(&cfg)
	}
	pool := interception.NewPool(cfg)
	t.Cleanup(func() { assert.NoError(t, pool.Close()) })
	return tokenInRig{pool: pool, up: up}
}

func (r tokenInRig) acquire(t *testing.T, key string, tokenIn bool) *interception.Registration {
	t.Helper()
	ro := interception.Rollout{Key: key, Model: "mock", TokenIn: tokenIn}
	if !tokenIn {
		ro.Tokens = &dialects.TokenRequest{}
	}
	s, err := r.pool.Acquire(context.Background(), ro)
	require.NoError(t, err)
	return s
}

// converse makes a three-turn calculator conversation through s with
// openai-go: the model calls the tool, answers from its result (streamed),
// then calls the tool again for the user's next question.
func converse(t *testing.T, s *interception.Registration) []string {
	t.Helper()
	ctx := context.Background()
	c := openai.NewClient(optionsFor(s)...)
	p := openai.ChatCompletionNewParams{Model: "mock",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 2 + 3?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "calculator", Parameters: openai.FunctionParameters{"type": "object",
				"properties": map[string]any{"expression": map[string]any{"type": "string"}}},
		})},
	}
	first, err := c.Chat.Completions.New(ctx, p)
	require.NoError(t, err)
	require.Len(t, first.Choices[0].Message.ToolCalls, 1)
	call := first.Choices[0].Message.ToolCalls[0]
	p.Messages = append(p.Messages, first.Choices[0].Message.ToParam(), openai.ToolMessage("5", call.ID))

	stream := c.Chat.Completions.NewStreaming(ctx, p)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	require.NoError(t, stream.Err())
	require.Equal(t, "The answer is 5.", acc.Choices[0].Message.Content)
	p.Messages = append(p.Messages, acc.Choices[0].Message.ToParam(), openai.UserMessage("And 4 * 6?"))

	third, err := c.Chat.Completions.New(ctx, p)
	require.NoError(t, err)
	require.Len(t, third.Choices[0].Message.ToolCalls, 1)
	// The texts each turn adds to the conversation after the previous
	// turn's answer.
	return []string{"What is 2 + 3?", "5", "And 4 * 6?"}
}

// sampledIDs are a turn's prompt ids followed by its completion ids.
func sampledIDs(t *testing.T, turn trace.Turn) []int32 {
	t.Helper()
	require.NotNil(t, turn.Tokens, "turn %d holds token data", turn.Index)
	require.NotEmpty(t, turn.Tokens.CompletionIDs)
	return append(slices.Clone(turn.Tokens.PromptIDs), turn.Tokens.CompletionIDs...)
}

// extends reports whether turn's prompt starts with prev's prompt and
// completion ids.
func extends(t *testing.T, prev, turn trace.Turn) bool {
	t.Helper()
	ids := sampledIDs(t, prev)
	return len(turn.Tokens.PromptIDs) > len(ids) && slices.Equal(ids, []int32(turn.Tokens.PromptIDs[:len(ids)]))
}

// Without token-in the server re-tokenizes each turn's conversation, and
// in merge mode turn 2's prompt does not extend turn 1's ids; with it,
// every later turn's prompt is exactly the earlier turn's prompt and
// completion ids followed by the new messages' tokens.
func TestTokenInExactPrefix(t *testing.T) {
	r := newTokenInRig(t, nil)
	plain := r.acquire(t, "run/0/0/0", false)
	converse(t, plain)
	turns, ok := plain.Finish()
	require.True(t, ok)
	require.Len(t, turns, 3)
	for i, turn := range turns {
		assert.False(t, turn.TokenIn, "turn %d", i)
	}
	assert.False(t, extends(t, turns[0], turns[1]), "re-tokenized, turn 2 does not extend turn 1")
	assert.NotContains(t, r.up.paths(), "/v1/chat/completions/tokens")

	in := r.acquire(t, "run/0/1/0", true)
	added := converse(t, in)
	turns, ok = in.Finish()
	require.True(t, ok)
	require.Len(t, turns, 3)
	assert.False(t, turns[0].TokenIn, "the first turn goes as text")
	assert.Equal(t, dialects.TokenIDs(mock.TokenIDs(added[0])), turns[0].Tokens.PromptIDs)
	for i := 1; i < 3; i++ {
		assert.True(t, turns[i].TokenIn, "turn %d goes in as tokens", i)
		want := append(sampledIDs(t, turns[i-1]), mock.TokenIDs(added[i])...)
		assert.Equal(t, dialects.TokenIDs(want), turns[i].Tokens.PromptIDs, "turn %d's prompt", i)
		assert.Equal(t, 200, turns[i].Status)
		assert.Equal(t, "/v1/chat/completions", turns[i].Route, "the caller's route")
	}
	assert.True(t, turns[1].Streamed)

	var sent struct {
		Tokens   []int32           `json:"tokens"`
		Messages []json.RawMessage `json:"messages"`
		Tools    []json.RawMessage `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(r.up.lastTo("/v1/chat/completions/tokens"), &sent))
	assert.Equal(t, []int32(turns[2].Tokens.PromptIDs), sent.Tokens, "the prompt went up as ids")
	assert.Len(t, sent.Messages, 5, "the messages go up too")
	assert.Len(t, sent.Tools, 1)
	var tok map[string]any
	require.NoError(t, json.Unmarshal(r.up.lastTo("/tokenize"), &tok), "tokenize is asked at the server's root")
	assert.Equal(t, "mock", tok["model"])
	assert.Contains(t, tok, "tools")
}

// A conversation that rewrites its history is no prefix of an earlier
// turn's: it goes as text.
func TestTokenInRewrittenHistoryGoesAsText(t *testing.T) {
	var log logtest.Buffer
	r := newTokenInRig(t, nil, func(c *interception.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	s := r.acquire(t, "run/0/0/0", true)
	ctx := context.Background()
	c := openai.NewClient(optionsFor(s)...)
	p := openai.ChatCompletionNewParams{Model: "mock",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 2 + 3?")}}
	first, err := c.Chat.Completions.New(ctx, p)
	require.NoError(t, err)
	p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 2 + 3? Be brief."),
		first.Choices[0].Message.ToParam(), openai.UserMessage("And 4 * 6?")}
	_, err = c.Chat.Completions.New(ctx, p)
	require.NoError(t, err)
	p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 2 + 3?"),
		openai.AssistantMessage("The answer is 6."), openai.UserMessage("Sure?")}
	_, err = c.Chat.Completions.New(ctx, p)
	require.NoError(t, err)

	turns, ok := s.Finish()
	require.True(t, ok)
	require.Len(t, turns, 3)
	for i, turn := range turns {
		assert.False(t, turn.TokenIn, "turn %d", i)
		require.NotNil(t, turn.Tokens, "turn %d still traces tokens", i)
	}
	assert.NotContains(t, r.up.paths(), "/v1/chat/completions/tokens")
	assert.Equal(t, 1, strings.Count(log.String(), "token-in: call sent as text"), "said once per rollout: %s", log.String())
	assert.Contains(t, log.String(), "no earlier turn")
	assert.NotContains(t, log.String(), s.Secret)
}

// An upstream that does not serve /tokenize gets token-in calls as text;
// one whose /tokenize fails for good fails the call as the provider's
// failure, not the agent's.
func TestTokenInTokenizeUnavailable(t *testing.T) {
	for _, tt := range []struct {
		name    string
		status  int
		failure trace.UpstreamFailure
	}{
		{"not served", http.StatusNotFound, ""},
		{"failing", http.StatusServiceUnavailable, trace.UpstreamStatus},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newTokenInRig(t, map[string]int{"/tokenize": tt.status})
			s := r.acquire(t, "run/0/0/0", true)
			ctx := context.Background()
			c := openai.NewClient(optionsFor(s)...)
			p := openai.ChatCompletionNewParams{Model: "mock",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 2 + 3?")}}
			first, err := c.Chat.Completions.New(ctx, p)
			require.NoError(t, err)
			p.Messages = append(p.Messages, first.Choices[0].Message.ToParam(), openai.UserMessage("And 4 * 6?"))
			second, err := c.Chat.Completions.New(ctx, p)
			turns, ok := s.Finish()
			require.True(t, ok)
			require.Len(t, turns, 2)
			assert.False(t, turns[1].TokenIn)
			assert.Equal(t, tt.failure, turns[1].UpstreamFailure)
			if tt.failure == "" {
				require.NoError(t, err)
				assert.Equal(t, "The answer is 24.", second.Choices[0].Message.Content)
				assert.Equal(t, []string{"/v1/chat/completions", "/tokenize", "/v1/chat/completions"}, r.up.paths())
				return
			}
			var apiErr *openai.Error
			require.True(t, errors.As(err, &apiErr), "%v", err)
			assert.Equal(t, http.StatusBadGateway, apiErr.StatusCode)
			assert.Equal(t, providers.DefaultMaxAttempts, turns[1].Attempts, "tokenize was retried as model calls are")
			assert.NotContains(t, r.up.paths(), "/v1/chat/completions/tokens")
		})
	}
}

// A call translated to a chat upstream goes in as tokens too.
func TestTokenInTranslated(t *testing.T) {
	r := newTokenInRig(t, nil)
	s := r.acquire(t, "run/0/0/0", true)
	ctx := context.Background()
	c := anthropic.NewClient(anthropicOptionsFor(s)...)
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is 4 + 4?"))}
	first, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: "mock", MaxTokens: 256, Messages: msgs})
	require.NoError(t, err)
	msgs = append(msgs, first.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("And 4 * 6?")))
	second, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: "mock", MaxTokens: 256, Messages: msgs})
	require.NoError(t, err)
	assert.Equal(t, "The answer is 24.", second.Content[0].Text)
	turns, ok := s.Finish()
	require.True(t, ok)
	require.Len(t, turns, 2)
	assert.False(t, turns[0].TokenIn)
	assert.True(t, turns[1].TokenIn)
	want := append(sampledIDs(t, turns[0]), mock.TokenIDs("And 4 * 6?")...)
	assert.Equal(t, dialects.TokenIDs(want), turns[1].Tokens.PromptIDs)
}

// A call that branches from an earlier turn than the latest extends that
// turn's ids.
func TestTokenInBranchesFromEarlierTurn(t *testing.T) {
	r := newTokenInRig(t, nil)
	s := r.acquire(t, "run/0/0/0", true)
	ctx := context.Background()
	c := openai.NewClient(optionsFor(s)...)
	p := openai.ChatCompletionNewParams{Model: "mock",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 2 + 3?")}}
	first, err := c.Chat.Completions.New(ctx, p)
	require.NoError(t, err)
	root := append(slices.Clone(p.Messages), first.Choices[0].Message.ToParam())
	for _, next := range []string{"And 4 * 6?", "And 7 - 1?"} {
		p.Messages = append(slices.Clone(root), openai.UserMessage(next))
		_, err = c.Chat.Completions.New(ctx, p)
		require.NoError(t, err)
	}
	turns, ok := s.Finish()
	require.True(t, ok)
	require.Len(t, turns, 3)
	assert.True(t, turns[2].TokenIn)
	want := append(sampledIDs(t, turns[0]), mock.TokenIDs("And 7 - 1?")...)
	assert.Equal(t, dialects.TokenIDs(want), turns[2].Tokens.PromptIDs, "the branch extends turn 1, not turn 2")
}

// A gateway registration asks for token-in with "token_in": true.
func TestTokenInGatewayRegistration(t *testing.T) {
	m, err := mock.New(mock.Config{TokenMerge: true})
	require.NoError(t, err)
	up := &calls{}
	srv := httptest.NewServer(up.wrap(m))
	t.Cleanup(srv.Close)
	pool := interception.NewPool(interception.Config{Upstream: providers.NewOpenAI(srv.URL+"/v1", "upstream-key"), GatewayToken: gatewayToken})
	t.Cleanup(func() { assert.NoError(t, pool.Close()) })
	slot, err := pool.Acquire(context.Background(), interception.Rollout{Key: "run/0/0/0"})
	require.NoError(t, err)

	status, body := gatewayCall(t, http.MethodPost, slot.LocalURL+"/v1/rollouts/tok-1/register", gatewayToken, `{"model":"policy","token_in":true}`)
	require.Equal(t, http.StatusOK, status, string(body))
	var reg struct {
		OpenAIBaseURL string `json:"openai_base_url"`
		APIKey        string `json:"api_key"`
	}
	require.NoError(t, json.Unmarshal(body, &reg))
	c := openai.NewClient(option.WithBaseURL(reg.OpenAIBaseURL+"/"), option.WithAPIKey(reg.APIKey), option.WithMaxRetries(0))
	p := openai.ChatCompletionNewParams{Model: "anything",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 2 + 3?")}}
	first, err := c.Chat.Completions.New(context.Background(), p)
	require.NoError(t, err)
	p.Messages = append(p.Messages, first.Choices[0].Message.ToParam(), openai.UserMessage("And 4 * 6?"))
	_, err = c.Chat.Completions.New(context.Background(), p)
	require.NoError(t, err)
	assert.Equal(t, []string{"/v1/chat/completions", "/tokenize", "/tokenize", "/v1/chat/completions/tokens"}, up.paths())
}

// A chat template whose tokens of the whole conversation do not start with
// those of the earlier turn's leaves the call as text.
func TestTokenInTemplateMismatchGoesAsText(t *testing.T) {
	m, err := mock.New(mock.Config{})
	require.NoError(t, err)
	up := &calls{}
	srv := httptest.NewServer(up.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/tokenize" {
			m.ServeHTTP(w, r)
			return
		}
		var req struct {
			AddGenerationPrompt bool `json:"add_generation_prompt"`
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		tokens := map[bool]string{true: "[1, 2, 3]", false: "[9]"}[req.AddGenerationPrompt]
		_, _ = w.Write([]byte(`{"count": 1, "max_model_len": 100, "tokens": ` + tokens + `}`))
	})))
	t.Cleanup(srv.Close)
	pool := interception.NewPool(interception.Config{Upstream: providers.NewOpenAI(srv.URL+"/v1", "upstream-key")})
	t.Cleanup(func() { assert.NoError(t, pool.Close()) })
	s, err := pool.Acquire(context.Background(), interception.Rollout{Key: "run/0/0/0", TokenIn: true})
	require.NoError(t, err)

	c := openai.NewClient(optionsFor(s)...)
	p := openai.ChatCompletionNewParams{Model: "mock",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 2 + 3?")}}
	first, err := c.Chat.Completions.New(context.Background(), p)
	require.NoError(t, err)
	p.Messages = append(p.Messages, first.Choices[0].Message.ToParam(), openai.UserMessage("And 4 * 6?"))
	_, err = c.Chat.Completions.New(context.Background(), p)
	require.NoError(t, err)
	turns, ok := s.Finish()
	require.True(t, ok)
	require.Len(t, turns, 2)
	assert.False(t, turns[1].TokenIn)
	assert.Equal(t, []string{"/v1/chat/completions", "/tokenize", "/tokenize", "/v1/chat/completions"}, up.paths())
}
