package interception_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/trace"
)

// bodies keeps every request body an upstream got.
type bodies struct {
	mu   sync.Mutex
	seen [][]byte
}

func (b *bodies) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.seen = append(b.seen, data)
		b.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(data))
		next.ServeHTTP(w, r)
	})
}

func (b *bodies) last() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seen[len(b.seen)-1]
}

// tokenRig is a pool in front of the mock model, speaking chat, with one
// rollout that traces tokens and one that does not.
type tokenRig struct {
	pool          *interception.Pool
	traced, plain *interception.Registration
	up            *bodies
}

func newTokenRig(t *testing.T) tokenRig {
	t.Helper()
	m, err := mock.New(mock.Config{})
	require.NoError(t, err)
	up := &bodies{}
	srv := httptest.NewServer(up.wrap(m))
	t.Cleanup(srv.Close)
	pool := interception.NewPool(interception.Config{Upstream: providers.NewOpenAI(srv.URL+"/v1", "upstream-key")})
	t.Cleanup(func() { assert.NoError(t, pool.Close()) })
	traced, err := pool.Acquire(context.Background(), interception.Rollout{Key: "run/0/0/0", Model: "mock",
		Tokens: &dialects.TokenRequest{TopLogprobs: 2}})
	require.NoError(t, err)
	plain, err := pool.Acquire(context.Background(), interception.Rollout{Key: "run/0/1/0"})
	require.NoError(t, err)
	return tokenRig{pool: pool, traced: traced, plain: plain, up: up}
}

// assertTokens checks a turn's token data against the mock's tokenization
// of the prompt and the completion.
func assertTokens(t *testing.T, turn trace.Turn, prompt, completion string) {
	t.Helper()
	require.NotNil(t, turn.Tokens, "the turn holds token data")
	tok := turn.Tokens
	assert.Equal(t, dialects.TokenIDs(mock.TokenIDs(prompt)), tok.PromptIDs)
	assert.Equal(t, dialects.TokenIDs(mock.TokenIDs(completion)), tok.CompletionIDs)
	require.Len(t, tok.Logprobs, len(tok.CompletionIDs))
	for i, lp := range tok.Logprobs {
		assert.Equal(t, float32(mock.Logprob(i)), lp, "logprob %d", i)
	}
	assert.Equal(t, 2, tok.TopK)
	require.Len(t, tok.TopTokens, 2*len(tok.CompletionIDs))
	assert.Equal(t, completion[:1], tok.TopTokens[0], "the first alternative is the sampled token")
	assert.Equal(t, float32(mock.Logprob(0)-1), tok.TopLogprobs[1])
}

func TestTraceTokensRelayed(t *testing.T) {
	r := newTokenRig(t)
	c := openai.NewClient(optionsFor(r.traced)...)
	params := openai.ChatCompletionNewParams{Model: "mock", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 2 + 3?")}}

	resp, err := c.Chat.Completions.New(context.Background(), params)
	require.NoError(t, err)
	content := resp.Choices[0].Message.Content
	require.NotEmpty(t, content)
	var sent map[string]any
	require.NoError(t, json.Unmarshal(r.up.last(), &sent))
	assert.Equal(t, true, sent["logprobs"])
	assert.Equal(t, true, sent["return_token_ids"])
	assert.EqualValues(t, 2, sent["top_logprobs"])

	stream := c.Chat.Completions.NewStreaming(context.Background(), params)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, content, acc.Choices[0].Message.Content, "the caller's answer is whole")

	turns, ok := r.traced.Finish()
	require.True(t, ok)
	require.Len(t, turns, 2)
	assertTokens(t, turns[0], "What is 2 + 3?", content)
	assert.False(t, turns[0].Streamed)
	assertTokens(t, turns[1], "What is 2 + 3?", content)
	assert.True(t, turns[1].Streamed)
}

// A call translated to a chat upstream asks for token data on the encoded
// request and records it.
func TestTraceTokensTranslated(t *testing.T) {
	r := newTokenRig(t)
	c := anthropic.NewClient(anthropicOptionsFor(r.traced)...)
	msg, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "mock", MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is 4 + 4?"))},
	})
	require.NoError(t, err)
	require.NotEmpty(t, msg.Content)
	var sent map[string]any
	require.NoError(t, json.Unmarshal(r.up.last(), &sent))
	assert.Equal(t, true, sent["return_token_ids"])
	turns, ok := r.traced.Finish()
	require.True(t, ok)
	require.Len(t, turns, 1)
	assertTokens(t, turns[0], "What is 4 + 4?", msg.Content[0].Text)
}

// Without token tracing a relayed body reaches the upstream byte for byte
// and the turn holds no token data.
func TestWithoutTraceTokensRequestUnchanged(t *testing.T) {
	r := newTokenRig(t)
	body := `{"model": "mock", "messages": [{"role": "user", "content": "What is 2 + 3?"}], "x_extra": [1, 2]}`
	req, err := http.NewRequest(http.MethodPost, r.plain.LocalURL+"/v1/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+r.plain.Secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(answer))
	assert.Equal(t, body, string(r.up.last()), "the upstream got the caller's bytes")
	assert.NotContains(t, string(answer), "logprobs")
	turns, ok := r.plain.Finish()
	require.True(t, ok)
	require.Len(t, turns, 1)
	assert.Nil(t, turns[0].Tokens)
	out, err := json.Marshal(turns[0])
	require.NoError(t, err)
	assert.NotContains(t, string(out), `"tokens"`)
}

// A trace stores token ids and log probabilities packed: base64 of
// little-endian int32 and float32, read back alike.
func TestTokensJSONIsPacked(t *testing.T) {
	tok := dialects.Tokens{PromptIDs: dialects.TokenIDs{1, 70000, -1}, CompletionIDs: dialects.TokenIDs{5},
		Logprobs: dialects.Float32s{-0.25, -1.5}}
	out, err := json.Marshal(tok)
	require.NoError(t, err)
	var wire map[string]any
	require.NoError(t, json.Unmarshal(out, &wire))
	raw, err := base64.StdEncoding.DecodeString(wire["prompt_ids"].(string))
	require.NoError(t, err)
	require.Len(t, raw, 12)
	assert.Equal(t, uint32(70000), binary.LittleEndian.Uint32(raw[4:]))
	raw, err = base64.StdEncoding.DecodeString(wire["logprobs"].(string))
	require.NoError(t, err)
	require.Len(t, raw, 8)
	var back dialects.Tokens
	require.NoError(t, json.Unmarshal(out, &back))
	assert.Equal(t, tok, back)
	require.NoError(t, json.Unmarshal([]byte(`{"prompt_ids":[3,4],"logprobs":[-0.5]}`), &back), "plain arrays are read too")
	assert.Equal(t, dialects.TokenIDs{3, 4}, back.PromptIDs)
	assert.Error(t, json.Unmarshal([]byte(`{"prompt_ids":"AAA="}`), &back), "not whole int32s")
}

func optionsFor(s *interception.Registration) []option.RequestOption {
	return []option.RequestOption{option.WithBaseURL(s.LocalURL + "/v1/"), option.WithAPIKey(s.Secret), option.WithMaxRetries(0)}
}

func anthropicOptionsFor(s *interception.Registration) []aoption.RequestOption {
	return []aoption.RequestOption{aoption.WithBaseURL(s.LocalURL), aoption.WithAPIKey(s.Secret), aoption.WithMaxRetries(0)}
}
