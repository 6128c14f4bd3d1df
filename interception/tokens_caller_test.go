package interception_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/providers"
)

// vllmRequest is what the fake vLLM reads of a chat request.
type vllmRequest struct {
	Stream         bool `json:"stream"`
	Logprobs       bool `json:"logprobs"`
	TopLogprobs    int  `json:"top_logprobs"`
	ReturnTokenIDs bool `json:"return_token_ids"`
}

type vllmAlt struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
}

type vllmPosition struct {
	vllmAlt
	TopLogprobs []vllmAlt `json:"top_logprobs"`
}

type vllmChoice struct {
	Index        int                        `json:"index"`
	Message      map[string]string          `json:"message,omitempty"`
	Delta        map[string]string          `json:"delta,omitempty"`
	Logprobs     *map[string][]vllmPosition `json:"logprobs"` // null when not asked, as vLLM and OpenAI write it
	FinishReason *string                    `json:"finish_reason"`
	TokenIDs     []int32                    `json:"token_ids,omitempty"`
}

type vllmAnswer struct {
	ID             string       `json:"id"`
	Object         string       `json:"object"`
	Created        int          `json:"created"`
	Model          string       `json:"model"`
	Choices        []vllmChoice `json:"choices"`
	PromptTokenIDs []int32      `json:"prompt_token_ids,omitempty"`
}

// vllmChoiceOf is the choice for the answer's characters text at the
// fake's positions from at, with what req asks of their token data.
func vllmChoiceOf(req vllmRequest, text string, at int) vllmChoice {
	c := vllmChoice{}
	if !req.Logprobs && !req.ReturnTokenIDs {
		return c
	}
	var positions []vllmPosition
	for i, r := range text {
		p := vllmPosition{vllmAlt: vllmAlt{string(r), -0.5 * float64(at+i)}, TopLogprobs: []vllmAlt{}}
		for k := range req.TopLogprobs {
			p.TopLogprobs = append(p.TopLogprobs, vllmAlt{fmt.Sprintf("%c%d", r, k), -float64(k)})
		}
		positions = append(positions, p)
		if req.ReturnTokenIDs {
			c.TokenIDs = append(c.TokenIDs, r)
		}
	}
	if req.Logprobs {
		c.Logprobs = &map[string][]vllmPosition{"content": positions}
	}
	return c
}

// vllm is a fake vLLM chat upstream that answers "Hi!" with the token
// data each request asks for, the way vLLM writes it, streamed or not.
func vllm(t *testing.T) (*httptest.Server, *bodies) {
	t.Helper()
	seen := &bodies{}
	srv := httptest.NewServer(seen.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req vllmRequest
		data, _ := io.ReadAll(r.Body)
		assert.NoError(t, json.Unmarshal(data, &req))
		stop := "stop"
		answer := vllmAnswer{ID: "chatcmpl-1", Object: "chat.completion", Created: 1, Model: "m"}
		if req.ReturnTokenIDs {
			answer.PromptTokenIDs = []int32{1, 2, 3}
		}
		if !req.Stream {
			c := vllmChoiceOf(req, "Hi!", 0)
			c.Message, c.FinishReason = map[string]string{"role": "assistant", "content": "Hi!"}, &stop
			answer.Choices = []vllmChoice{c}
			body, _ := json.Marshal(answer)
			writeJSON(w, http.StatusOK, string(body))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		answer.Object = "chat.completion.chunk"
		for i, r := range "Hi!" {
			c := vllmChoiceOf(req, string(r), i)
			c.Delta = map[string]string{"content": string(r)}
			answer.Choices = []vllmChoice{c}
			chunk, _ := json.Marshal(answer)
			writeEvent(w, string(chunk))
			answer.PromptTokenIDs = nil
		}
		answer.Choices = []vllmChoice{{Delta: map[string]string{}, FinishReason: &stop}}
		chunk, _ := json.Marshal(answer)
		writeEvent(w, string(chunk))
		writeEvent(w, "[DONE]")
	})))
	t.Cleanup(srv.Close)
	return srv, seen
}

// vllmRig is a pool in front of the fake vLLM with a rollout that traces
// tokens, two alternatives per position, and one that does not.
func vllmRig(t *testing.T) (traced, plain *interception.Registration, seen *bodies) {
	t.Helper()
	srv, seen := vllm(t)
	pool := interception.NewPool(interception.Config{Upstream: providers.NewOpenAI(srv.URL+"/v1", "upstream-key")})
	t.Cleanup(func() { assert.NoError(t, pool.Close()) })
	traced, err := pool.Acquire(context.Background(), interception.Rollout{Key: "run/0/0/0", Model: "m",
		Tokens: &dialects.TokenRequest{TopLogprobs: 2}})
	require.NoError(t, err)
	plain, err = pool.Acquire(context.Background(), interception.Rollout{Key: "run/0/1/0", Model: "m"})
	require.NoError(t, err)
	return traced, plain, seen
}

// chatBytes posts a chat body as it is and returns the answer's bytes.
func chatBytes(t *testing.T, reg *interception.Registration, body string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, reg.LocalURL+"/v1/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+reg.Secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(answer))
	return answer
}

// TestTracedRelayAnswersWhatTheCallerAsked: with token tracing on, a
// relayed chat caller gets the bytes it gets without tracing, streamed or
// not, whatever it asked of logprobs and token ids itself. The upstream is
// asked for the run's and the caller's alternatives together, and the
// trace keeps the run's.
func TestTracedRelayAnswersWhatTheCallerAsked(t *testing.T) {
	traced, plain, seen := vllmRig(t)
	tests := []struct {
		name, fields string
		top          int // the traced call's top_logprobs upstream
	}{
		{"nothing asked", ``, 2},
		{"logprobs false", `,"logprobs":false,"top_logprobs":3`, 2},
		{"logprobs", `,"logprobs":true`, 2},
		{"one alternative", `,"logprobs":true,"top_logprobs":1`, 2},
		{"more alternatives than the run", `,"logprobs":true,"top_logprobs":3`, 3},
		{"token ids", `,"return_token_ids":true`, 2},
	}
	for _, stream := range []bool{false, true} {
		for _, tt := range tests {
			body := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"hello"}],"stream":%t%s}`, stream, tt.fields)
			want := chatBytes(t, plain, body)
			got := chatBytes(t, traced, body)
			assert.Equal(t, string(want), string(got), "%s, streamed %t: the caller's bytes", tt.name, stream)
			var sent vllmRequest
			require.NoError(t, json.Unmarshal(seen.last(), &sent))
			assert.Equal(t, vllmRequest{Stream: stream, Logprobs: true, TopLogprobs: tt.top, ReturnTokenIDs: true}, sent,
				"%s, streamed %t: asked upstream", tt.name, stream)
		}
	}
	turns, ok := traced.Finish()
	require.True(t, ok)
	require.Len(t, turns, 2*len(tests))
	for _, turn := range turns {
		require.NotNil(t, turn.Tokens, "turn %d", turn.Index)
		assert.Equal(t, dialects.TokenIDs{1, 2, 3}, turn.Tokens.PromptIDs, "turn %d", turn.Index)
		assert.Equal(t, dialects.TokenIDs{'H', 'i', '!'}, turn.Tokens.CompletionIDs, "turn %d", turn.Index)
		assert.Equal(t, 2, turn.Tokens.TopK, "turn %d keeps the run's alternatives", turn.Index)
		assert.Len(t, turn.Tokens.TopTokens, 6, "turn %d", turn.Index)
	}
}

// TestTracedRelayWithTheSDK: an openai-go caller of a traced rollout gets
// the logprobs it asked for, with its own count of alternatives, and no
// token ids, streamed or not.
func TestTracedRelayWithTheSDK(t *testing.T) {
	traced, _, _ := vllmRig(t)
	c := openai.NewClient(optionsFor(traced)...)
	ctx := context.Background()
	messages := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}

	resp, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "m", Messages: messages,
		Logprobs: openai.Bool(true), TopLogprobs: openai.Int(1)})
	require.NoError(t, err)
	require.Len(t, resp.Choices[0].Logprobs.Content, 3)
	for _, p := range resp.Choices[0].Logprobs.Content {
		assert.Len(t, p.TopLogprobs, 1, "the caller's count of alternatives")
	}
	assert.NotContains(t, resp.RawJSON(), "token_ids")

	stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "m", Messages: messages})
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		chunk := stream.Current()
		assert.NotContains(t, chunk.RawJSON(), "token_ids")
		for _, choice := range chunk.Choices {
			assert.Equal(t, "null", choice.JSON.Logprobs.Raw(), "no logprobs were asked")
		}
		acc.AddChunk(chunk)
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, "Hi!", acc.Choices[0].Message.Content)

	turns, ok := traced.Finish()
	require.True(t, ok)
	require.Len(t, turns, 2)
	for _, turn := range turns {
		require.NotNil(t, turn.Tokens)
		assert.Len(t, turn.Tokens.Logprobs, 3, "the trace has what the caller was not given")
		assert.Equal(t, 2, turn.Tokens.TopK)
	}
}
