package dialects_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
)

// Pieces of a chat completion.
const (
	head    = `{"id":"c1",`
	message = `"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},`
	usage   = `"usage":{"prompt_tokens":2,"completion_tokens":2}}`
	twoAlts = `"logprobs":{"content":[{"token":"h","logprob":-0.5,"top_logprobs":[{"token":"h","logprob":-0.5},{"token":"x","logprob":-1.5}]},` +
		`{"token":"i","logprob":-0.25,"top_logprobs":[{"token":"i","logprob":-0.25},{"token":"y","logprob":-2}]}]},`
	oneAlt = `"logprobs":{"content":[{"token":"h","logprob":-0.5,"top_logprobs":[{"token":"h","logprob":-0.5}]},` +
		`{"token":"i","logprob":-0.25,"top_logprobs":[{"token":"i","logprob":-0.25}]}]},`
	noAlt = `"logprobs":{"content":[{"token":"h","logprob":-0.5,"top_logprobs":[]},{"token":"i","logprob":-0.25,"top_logprobs":[]}]},`
)

// traced is a chat completion as a vLLM upstream answers a traced call:
// token ids, and two alternatives per position.
const traced = head + `"prompt_token_ids":[1,2],` + message + twoAlts + `"finish_reason":"stop","token_ids":[104,105]}],` + usage

// TestCallerTokensTrim: a traced call asks the upstream for what the run
// and the caller want together, and the caller's answer is trimmed to
// what it asked for itself.
func TestCallerTokensTrim(t *testing.T) {
	const tail = `"finish_reason":"stop"}],` + usage
	tests := []struct {
		name, request string
		runTop        int
		sentTop       any // the upstream's top_logprobs; nil: not sent
		want          string
	}{
		{"nothing asked", `{"model":"m","messages":[]}`, 2, 2.0, head + message + `"logprobs":null,` + tail},
		{"logprobs false", `{"model":"m","messages":[],"logprobs":false}`, 2, 2.0, head + message + `"logprobs":null,` + tail},
		{"one alternative", `{"model":"m","messages":[],"logprobs":true,"top_logprobs":1}`, 2, 2.0, head + message + oneAlt + tail},
		{"no alternatives", `{"model":"m","messages":[],"logprobs":true}`, 2, 2.0, head + message + noAlt + tail},
		{"more than the run", `{"model":"m","messages":[],"logprobs":true,"top_logprobs":3}`, 2, 3.0,
			head + message + twoAlts + tail},
		{"token ids asked", `{"model":"m","messages":[],"return_token_ids":true}`, 0, nil,
			head + `"prompt_token_ids":[1,2],` + message + `"logprobs":null,"finish_reason":"stop","token_ids":[104,105]}],` + usage},
		{"all asked", `{"model":"m","messages":[],"return_token_ids":true,"logprobs":true,"top_logprobs":2}`, 0, 2.0, traced},
	}
	for _, tt := range tests {
		body, caller, err := dialects.OverlayChatTokens([]byte(tt.request), dialects.TokenRequest{TopLogprobs: tt.runTop})
		require.NoError(t, err, tt.name)
		var sent map[string]any
		require.NoError(t, json.Unmarshal(body.Bytes(), &sent), tt.name)
		assert.Equal(t, true, sent["logprobs"], tt.name)
		assert.Equal(t, true, sent["return_token_ids"], tt.name)
		assert.Equal(t, tt.sentTop, sent["top_logprobs"], "%s: the upstream's top_logprobs", tt.name)
		assert.Equal(t, tt.want, string(caller.Trim([]byte(traced))), "%s: Trim", tt.name)
		assert.Equal(t, tt.want != traced, caller.Trims(), "%s: Trims", tt.name)
	}
}

// TestCallerTokensTrimChunks: a stream's chunks are trimmed alike, and
// what is no chunk passes as it is.
func TestCallerTokensTrimChunks(t *testing.T) {
	_, caller, err := dialects.OverlayChatTokens([]byte(`{"model":"m","messages":[],"stream":true}`), dialects.TokenRequest{TopLogprobs: 2})
	require.NoError(t, err)
	tests := []struct{ chunk, want string }{
		{`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":[1,2]}`,
			`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`},
		{`{"id":"c1","choices":[{"index":0,"delta":{"content":"h"},"logprobs":{"content":[{"token":"h","logprob":-0.5,"top_logprobs":[]}]},"finish_reason":null,"token_ids":[104]}]}`,
			`{"id":"c1","choices":[{"index":0,"delta":{"content":"h"},"logprobs":null,"finish_reason":null}]}`},
		{`{"prompt_token_ids":[1], "id": "c1", "choices": []}`, `{"id": "c1", "choices": []}`},
		{`[DONE]`, `[DONE]`},
		{`{"error":{"message":"boom"}}`, `{"error":{"message":"boom"}}`},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, string(caller.Trim([]byte(tt.chunk))), "Trim(%s)", tt.chunk)
	}
}

// TestChatTokensKeepTheRunsAlternatives: the trace keeps as many
// alternatives per position as the run asks, whatever the caller's answer
// holds.
func TestChatTokensKeepTheRunsAlternatives(t *testing.T) {
	tok := dialects.ChatTokens([]byte(traced), dialects.TokenRequest{TopLogprobs: 1})
	require.NotNil(t, tok)
	assert.Equal(t, dialects.TokenIDs{1, 2}, tok.PromptIDs)
	assert.Equal(t, dialects.TokenIDs{104, 105}, tok.CompletionIDs)
	assert.Equal(t, 1, tok.TopK)
	assert.Equal(t, []string{"h", "i"}, tok.TopTokens)

	none := dialects.ChatTokens([]byte(traced), dialects.TokenRequest{})
	require.NotNil(t, none)
	assert.Zero(t, none.TopK)
	assert.Empty(t, none.TopTokens)
	assert.Len(t, none.Logprobs, 2)

	s := dialects.NewChatTokenStream(dialects.TokenRequest{TopLogprobs: 1})
	s.Add([]byte(traced))
	assert.Equal(t, tok, s.Tokens())
}
