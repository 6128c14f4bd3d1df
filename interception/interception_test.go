package interception_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/trace"
)

const runModel = "run-model"

func ptr[T any](v T) *T { return &v }

// fixture is an interception pool in front of a fake upstream, with one
// rollout acquired.
type fixture struct {
	pool     *interception.Pool
	slot     *interception.Registration
	recorded chan trace.Turn
}

func newFixture(t *testing.T, upstreamURL string, mutate func(*interception.Config)) fixture {
	t.Helper()
	return fixtureOf(t, providers.NewOpenAI(upstreamURL+"/v1", "upstream-key"),
		dialects.Sampling{Temperature: ptr(0.25), Seed: ptr(int64(7))}, mutate)
}

// fixtureOf is an interception pool in front of up, retried without
// delays, with one rollout of runModel acquired that samples as sampling.
func fixtureOf(t *testing.T, up *providers.Client, sampling dialects.Sampling, mutate func(*interception.Config)) fixture {
	t.Helper()
	up.BaseDelay, up.MaxDelay = time.Microsecond, time.Microsecond
	recorded := make(chan trace.Turn, 16)
	cfg := interception.Config{
		Upstream: up,
		OnTurn:   func(_ string, turn trace.Turn) { recorded <- turn },
	}
	if mutate != nil {
		mutate(&cfg)
	}
	pool := interception.NewPool(cfg)
	t.Cleanup(func() { assert.NoError(t, pool.Close()) })
	slot, err := pool.Acquire(context.Background(), interception.Rollout{Key: "run/0/0/0", Model: runModel, Sampling: sampling})
	require.NoError(t, err)
	return fixture{pool: pool, slot: slot, recorded: recorded}
}

func (f fixture) client(secret string) *openai.Client {
	c := openai.NewClient(
		option.WithBaseURL(f.slot.LocalURL+"/v1/"),
		option.WithAPIKey(secret),
		option.WithMaxRetries(0),
	)
	return &c
}

// turn waits for the next recorded turn; the handler records it after the
// caller may already have its answer.
func (f fixture) turn(t *testing.T) trace.Turn {
	t.Helper()
	turn := <-f.recorded
	turns, ok := f.slot.Turns()
	require.True(t, ok)
	require.NotEmpty(t, turns)
	assert.Equal(t, turn, turns[len(turns)-1], "the turn is kept for the rollout")
	return turn
}

// upstream starts a fake provider; handler sees every /v1/chat/completions call.
func upstream(t *testing.T, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func writeEvent(w http.ResponseWriter, data string) {
	_, _ = fmt.Fprintf(w, "data: %s\n\n", data)
	w.(http.Flusher).Flush()
}

const toolCompletion = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"run-model-2026",
"choices":[{"index":0,"message":{"role":"assistant","content":null,"reasoning_content":"need to add",
"tool_calls":[{"id":"call_1","type":"function","function":{"name":"add","arguments":"{\"a\":1,\"b\":2}"}}]},"finish_reason":"tool_calls"}],
"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18},
"x_provider_field":{"keep":[1,2,{"deep":true}]}}`

func TestChatNonStreaming(t *testing.T) {
	var seen []byte
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		seen, _ = io.ReadAll(r.Body)
		writeJSON(w, http.StatusOK, toolCompletion)
	})
	f := newFixture(t, up.URL, nil)
	c := f.client(f.slot.Secret)

	got, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:       "caller-model",
		Temperature: openai.Float(1.5),
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("what is 1+2?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:       "add",
			Parameters: shared.FunctionParameters{"type": "object"},
		})},
	}, option.WithJSONSet("x_vendor_opts", map[string]any{"cache": "on"}))
	require.NoError(t, err)

	require.Len(t, got.Choices, 1)
	require.Len(t, got.Choices[0].Message.ToolCalls, 1)
	assert.Equal(t, "add", got.Choices[0].Message.ToolCalls[0].Function.Name)
	assert.Equal(t, `{"a":1,"b":2}`, got.Choices[0].Message.ToolCalls[0].Function.Arguments)
	assert.Contains(t, got.RawJSON(), `"x_provider_field":{"keep":[1,2,{"deep":true}]}`, "unknown response field reaches the client untouched")

	upReq, err := dialects.ParseChatRequest(seen)
	require.NoError(t, err)
	assert.Equal(t, runModel, upReq.Model, "upstream model")
	assert.Equal(t, ptr(0.25), upReq.Sampling.Temperature, "upstream temperature")
	assert.Equal(t, ptr(int64(7)), upReq.Sampling.Seed, "upstream seed")
	assert.Contains(t, string(seen), `"x_vendor_opts":{"cache":"on"}`)

	turn := f.turn(t)
	assert.Equal(t, 0, turn.Index)
	assert.Equal(t, dialects.NameChat, turn.Dialect)
	assert.Equal(t, "/v1/chat/completions", turn.Route)
	assert.False(t, turn.Streamed)
	assert.Equal(t, http.StatusOK, turn.Status)
	assert.Equal(t, 1, turn.Attempts)
	assert.Empty(t, turn.Error)
	assert.Equal(t, runModel, turn.Request.Model)
	assert.Equal(t, "what is 1+2?", turn.Request.Messages[0].Text())
	assert.Equal(t, []dialects.Tool{{Name: "add", Parameters: []byte(`{"type":"object"}`)}}, turn.Request.Tools)
	assert.Equal(t, dialects.Response{
		ID: "chatcmpl-1", Model: "run-model-2026", FinishReason: "tool_calls",
		Message: dialects.Message{Role: dialects.RoleAssistant, Reasoning: "need to add",
			ToolCalls: []dialects.ToolCall{{ID: "call_1", Name: "add", Arguments: `{"a":1,"b":2}`}}},
		Usage: dialects.Usage{InputTokens: 11, OutputTokens: 7},
	}, turn.Response)
	assert.Positive(t, turn.Latency)
	assert.Positive(t, turn.TTFT)
	assert.LessOrEqual(t, turn.TTFT, turn.Latency)

	turns, ok := f.slot.Finish()
	assert.True(t, ok)
	assert.Equal(t, []trace.Turn{turn}, turns, "Finish returns the recorded turns")
	f.slot.Release()
	assert.Zero(t, f.pool.Rollouts())
	_, ok = f.slot.Turns()
	assert.False(t, ok, "a released registration has no turns")
}

func TestRelayKeepsUnknownRequestFieldsByteExact(t *testing.T) {
	var seen []byte
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		seen, _ = io.ReadAll(r.Body)
		w.Header().Set("X-Request-Id", "req-9")
		writeJSON(w, http.StatusOK, toolCompletion)
	})
	f := newFixture(t, up.URL, nil)

	body := `{"model": "caller", "messages": [{"role":"user","content":"hi","x_msg":[1, 2]}], "temperature": 1, "x_vendor": {"a": "b\u00e9"}, "max_completion_tokens": 9}`
	req, err := http.NewRequest(http.MethodPost, f.slot.LocalURL+"/v1/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+f.slot.Secret)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)

	want := `{"model": "run-model", "messages": [{"role":"user","content":"hi","x_msg":[1, 2]}], "temperature": 0.25, "x_vendor": {"a": "b\u00e9"}, "max_completion_tokens": 9,"seed":7}`
	assert.Equal(t, want, string(seen), "body the upstream saw")
	assert.Equal(t, toolCompletion, string(got), "body the caller got")
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Equal(t, "req-9", resp.Header.Get("X-Request-Id"))
	assert.Empty(t, resp.Header.Get("X-Evalflow-Attempts"), "no header of evalflow's own reaches the caller")
}

// streamChunks is a streamed completion whose tool-call arguments are split
// over several chunks, with usage in the last chunk.
var streamChunks = []string{
	`{"id":"s-1","object":"chat.completion.chunk","created":1,"model":"run-model","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me "},"finish_reason":null}]}`,
	`{"id":"s-1","object":"chat.completion.chunk","created":1,"model":"run-model","choices":[{"index":0,"delta":{"content":"check."},"finish_reason":null}]}`,
	`{"id":"s-1","object":"chat.completion.chunk","created":1,"model":"run-model","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"lookup","arguments":""}}]},"finish_reason":null}]}`,
	`{"id":"s-1","object":"chat.completion.chunk","created":1,"model":"run-model","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\""}}]},"finish_reason":null}]}`,
	`{"id":"s-1","object":"chat.completion.chunk","created":1,"model":"run-model","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":": \"Paris\"}"}}]},"finish_reason":null}]}`,
	`{"id":"s-1","object":"chat.completion.chunk","created":1,"model":"run-model","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	`{"id":"s-1","object":"chat.completion.chunk","created":1,"model":"run-model","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":9,"total_tokens":29}}`,
	`[DONE]`,
}

func streamUpstream(t *testing.T) *httptest.Server {
	return upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range streamChunks {
			writeEvent(w, c)
		}
	})
}

func TestChatStreaming(t *testing.T) {
	f := newFixture(t, streamUpstream(t).URL, nil)
	c := f.client(f.slot.Secret)

	stream := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:    "caller-model",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather in Paris?")},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	require.NoError(t, stream.Err())
	require.NoError(t, stream.Close())

	require.Len(t, acc.Choices, 1)
	msg := acc.Choices[0].Message
	assert.Equal(t, "Let me check.", msg.Content)
	require.Len(t, msg.ToolCalls, 1)
	assert.Equal(t, "lookup", msg.ToolCalls[0].Function.Name)
	assert.Equal(t, `{"city": "Paris"}`, msg.ToolCalls[0].Function.Arguments)
	assert.Equal(t, int64(29), acc.Usage.TotalTokens)

	turn := f.turn(t)
	assert.Equal(t, 0, turn.Index)
	assert.True(t, turn.Streamed)
	assert.True(t, turn.Request.Stream)
	assert.Equal(t, http.StatusOK, turn.Status)
	assert.Empty(t, turn.Error)
	assert.Equal(t, dialects.Response{
		ID: "s-1", Model: "run-model", FinishReason: "tool_calls",
		Message: dialects.Message{Role: dialects.RoleAssistant,
			Content:   []dialects.Part{{Type: dialects.PartText, Text: "Let me check."}},
			ToolCalls: []dialects.ToolCall{{ID: "call_a", Name: "lookup", Arguments: `{"city": "Paris"}`}}},
		Usage: dialects.Usage{InputTokens: 20, OutputTokens: 9},
	}, turn.Response)
}

func TestStreamRelayedByteExact(t *testing.T) {
	f := newFixture(t, streamUpstream(t).URL, nil)
	req, err := http.NewRequest(http.MethodPost, f.slot.LocalURL+"/v1/chat/completions",
		strings.NewReader(`{"model":"x","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	req.Header.Set("X-Api-Key", f.slot.Secret)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)

	var want strings.Builder
	for _, c := range streamChunks {
		want.WriteString("data: " + c + "\n\n")
	}
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	assert.Equal(t, want.String(), string(got))
}

func TestStreamFlushedPerEvent(t *testing.T) {
	firstSeen := make(chan struct{})
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		writeEvent(w, `{"id":"s","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"one"}}]}`)
		select { // the second event waits until the client has the first
		case <-firstSeen:
		case <-r.Context().Done():
			return
		}
		writeEvent(w, `{"id":"s","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"two"},"finish_reason":"stop"}]}`)
		writeEvent(w, `[DONE]`)
	})
	f := newFixture(t, up.URL, nil)
	c := f.client(f.slot.Secret)

	// The deadline only turns a buffering relay from a hang into a failure.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("count")},
	})
	defer stream.Close()

	require.True(t, stream.Next(), "first event: %v", stream.Err())
	assert.Equal(t, "one", stream.Current().Choices[0].Delta.Content)
	close(firstSeen)
	require.True(t, stream.Next(), "second event: %v", stream.Err())
	assert.Equal(t, "two", stream.Current().Choices[0].Delta.Content)
	assert.False(t, stream.Next())
	require.NoError(t, stream.Err())
}

func TestBadSecret(t *testing.T) {
	var calls atomic.Int32
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		writeJSON(w, http.StatusOK, toolCompletion)
	})
	f := newFixture(t, up.URL, nil)

	for _, secret := range []string{"wrong", f.slot.Secret[:len(f.slot.Secret)-1] + "x", ""} {
		_, err := f.client(secret).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model:    "m",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		var apiErr *openai.Error
		require.ErrorAs(t, err, &apiErr, "secret %q", secret)
		assert.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)
		assert.Equal(t, "invalid_api_key", apiErr.Code)
		assert.Equal(t, dialects.ErrorTypeInvalidRequest, apiErr.Type)
		assert.NotContains(t, apiErr.Message, f.slot.Secret)
	}
	assert.Zero(t, calls.Load(), "no unauthenticated call reaches the upstream")
	turns, _ := f.slot.Turns()
	assert.Empty(t, turns, "unauthenticated calls are not recorded")
}

func TestOversizedBody(t *testing.T) {
	var calls atomic.Int32
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		writeJSON(w, http.StatusOK, toolCompletion)
	})
	f := newFixture(t, up.URL, func(c *interception.Config) { c.MaxBodyBytes = 1 << 10 })

	_, err := f.client(f.slot.Secret).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(strings.Repeat("x", 2<<10))},
	})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusRequestEntityTooLarge, apiErr.StatusCode)
	assert.Equal(t, "request_too_large", apiErr.Code)
	assert.Zero(t, calls.Load())
	assert.Equal(t, http.StatusRequestEntityTooLarge, f.turn(t).Status)
}

func TestUpstreamRetried(t *testing.T) {
	tests := []struct {
		name  string
		first func(w http.ResponseWriter)
	}{
		{"503", func(w http.ResponseWriter) {
			writeJSON(w, http.StatusServiceUnavailable, `{"error":{"message":"busy","type":"server_error","code":null}}`)
		}},
		{"429 with Retry-After", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "0")
			writeJSON(w, http.StatusTooManyRequests, `{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limit_exceeded"}}`)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					tt.first(w)
					return
				}
				writeJSON(w, http.StatusOK, toolCompletion)
			})
			f := newFixture(t, up.URL, nil)
			var raw *http.Response
			got, err := f.client(f.slot.Secret).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model:    "m",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			}, option.WithResponseInto(&raw))
			require.NoError(t, err)
			assert.Equal(t, http.StatusOK, raw.StatusCode)
			assert.Equal(t, "chatcmpl-1", got.ID)
			assert.Equal(t, int32(2), calls.Load())

			turn := f.turn(t)
			assert.Equal(t, 2, turn.Attempts)
			assert.Equal(t, http.StatusOK, turn.Status)
		})
	}
}

func TestUpstreamErrorRelayed(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusBadRequest, `{"error":{"message":"context too long","type":"invalid_request_error","code":"context_length_exceeded"}}`)
	})
	f := newFixture(t, up.URL, nil)
	_, err := f.client(f.slot.Secret).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	assert.Equal(t, "context_length_exceeded", apiErr.Code)

	turn := f.turn(t)
	assert.Equal(t, http.StatusBadRequest, turn.Status)
	assert.Contains(t, turn.Error, "context too long")
}

func TestUpstreamUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	f := newFixture(t, "http://"+addr, nil)
	_, err = f.client(f.slot.Secret).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadGateway, apiErr.StatusCode)
	assert.Equal(t, dialects.ErrorTypeServer, apiErr.Type)

	turn := f.turn(t)
	assert.Equal(t, http.StatusBadGateway, turn.Status)
	assert.Equal(t, providers.DefaultMaxAttempts, turn.Attempts)
	assert.NotEmpty(t, turn.Error)
}

func TestCallerDisconnectCancelsUpstream(t *testing.T) {
	arrived := make(chan struct{})
	canceled := make(chan struct{})
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		// net/http notices a closed connection only once the body is read.
		_, _ = io.ReadAll(r.Body)
		close(arrived)
		<-r.Context().Done()
		close(canceled)
	})
	f := newFixture(t, up.URL, nil)

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	_, err := f.client(f.slot.Secret).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	require.ErrorIs(t, err, context.Canceled)
	<-canceled // the upstream request was canceled; a leak would hang here

	assert.Equal(t, 499, f.turn(t).Status)
}

func TestModelsAndHealthz(t *testing.T) {
	f := newFixture(t, "http://127.0.0.1:1", nil)
	page, err := f.client(f.slot.Secret).Models.List(context.Background())
	require.NoError(t, err)
	require.Len(t, page.Data, 1)
	assert.Equal(t, runModel, page.Data[0].ID)

	_, err = f.client("nope").Models.List(context.Background())
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)

	resp, err := http.Get(f.slot.LocalURL + "/healthz")
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	resp, err = http.Get(f.slot.LocalURL + "/v1/nope")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Contains(t, string(body), `"error"`)
}
