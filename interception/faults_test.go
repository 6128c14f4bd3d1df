package interception_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/trace"
)

// sdkRetries is how often openai-go and anthropic-sdk-go retry a call by
// default.
const sdkRetries = 2

// retryBound is the most upstream calls one model call of a harness on an
// SDK with its default retries costs when the provider keeps failing: the
// interception's attempts for the first try, one for each retry.
const retryBound = providers.DefaultMaxAttempts + sdkRetries

const firstChunk = `{"id":"s-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me "},"finish_reason":null}]}`

// hang waits until the caller hangs up. The body is read first: only then
// does the server notice a connection closed under the handler.
func hang(r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

// providerFaults are the ways a provider fails a call, each with what the
// harness's SDK (openai-go, default retries) sees of it and how the turns
// record it.
var providerFaults = []struct {
	name   string
	stream bool // the harness streams
	serve  http.HandlerFunc
	// status is the one of the SDK's error; 0 for an error inside a stream.
	status  int
	failure trace.UpstreamFailure
	// tries is how many requests the SDK makes: a failure inside a stream
	// is not retried.
	tries int
}{
	{
		name: "cut-mid-body", status: http.StatusBadGateway, failure: trace.UpstreamConnection, tries: 1 + sdkRetries,
		serve: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "400")
			_, _ = io.WriteString(w, toolCompletion[:100])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		},
	},
	{
		name: "cut-mid-stream", stream: true, failure: trace.UpstreamConnection, tries: 1,
		serve: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			writeEvent(w, firstChunk)
			_, _ = io.WriteString(w, `data: {"id":"s-1","object":"chat.comp`)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		},
	},
	{
		name: "hang-before-headers", status: http.StatusGatewayTimeout, failure: trace.UpstreamTimeout, tries: 1 + sdkRetries,
		serve: func(_ http.ResponseWriter, r *http.Request) { hang(r) },
	},
	{
		name: "hang-mid-stream", stream: true, failure: trace.UpstreamTimeout, tries: 1,
		serve: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			writeEvent(w, firstChunk)
			hang(r)
		},
	},
	{
		name: "429-retry-after", status: http.StatusTooManyRequests, failure: trace.UpstreamStatus, tries: 1 + sdkRetries,
		serve: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After-Ms", "10")
			writeJSON(w, http.StatusTooManyRequests, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
		},
	},
	{
		name: "500", status: http.StatusInternalServerError, failure: trace.UpstreamStatus, tries: 1 + sdkRetries,
		serve: func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusInternalServerError, `{"error":{"message":"The server had an error","type":"server_error"}}`)
		},
	},
	{
		name: "invalid-json-200", status: http.StatusBadGateway, failure: trace.UpstreamBadAnswer, tries: 1 + sdkRetries,
		serve: func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, `<html><body>upstream connect error</body></html>`)
		},
	},
	{
		name: "truncated-sse", stream: true, failure: trace.UpstreamTruncated, tries: 1,
		serve: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			writeEvent(w, firstChunk)
		},
	},
}

// faultFixture is a fixture whose upstream client times out quickly.
func faultFixture(t *testing.T, url string) fixture {
	return newFixture(t, url, func(c *interception.Config) {
		up := c.Upstream.(*providers.Client)
		up.ResponseHeaderTimeout = 250 * time.Millisecond
		up.StreamIdleTimeout = 250 * time.Millisecond
	})
}

// TestProviderFaults is the provider half of the fault suite: for each way
// a provider fails, what the harness's SDK (openai-go with its default
// retries) sees, how the turns record it, and how many calls the provider
// got, within the documented bound (retryBound).
func TestProviderFaults(t *testing.T) {
	for _, tt := range providerFaults {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				tt.serve(w, r)
			})
			f := faultFixture(t, up.URL)
			sdk := openai.NewClient(option.WithBaseURL(f.slot.LocalURL+"/v1/"), option.WithAPIKey(f.slot.Secret))
			params := openai.ChatCompletionNewParams{
				Model:    "m",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			}

			var err error
			if tt.stream {
				s := sdk.Chat.Completions.NewStreaming(context.Background(), params)
				for s.Next() {
				}
				err = s.Err()
				require.Error(t, err, "the SDK sees an error, not a silent end")
				_ = s.Close()
			} else {
				_, err = sdk.Chat.Completions.New(context.Background(), params)
				var apiErr *openai.Error
				require.ErrorAs(t, err, &apiErr)
				assert.Equal(t, tt.status, apiErr.StatusCode)
			}
			assert.NotContains(t, err.Error(), "upstream-key")
			assert.NotContains(t, err.Error(), f.slot.Secret)

			turns := f.turns(t, tt.tries)
			attempts := 0
			var kinds []trace.UpstreamFailure
			for i, turn := range turns {
				assert.Equal(t, tt.failure, turn.UpstreamFailure, "turn %d: %s", i, turn.Error)
				assert.Equal(t, i > 0, turn.CallerRetry, "turn %d: the SDK's retries get one attempt", i)
				assert.NotContains(t, turn.Error, f.slot.Secret)
				attempts += turn.Attempts
				kinds = append(kinds, turn.UpstreamFailure)
			}
			wantAttempts := providers.DefaultMaxAttempts + tt.tries - 1
			if tt.stream {
				wantAttempts = 1 // the stream broke after its first event
			}
			assert.Equal(t, wantAttempts, attempts, "upstream attempts")
			if tt.failure == trace.UpstreamTimeout {
				// An attempt may time out before its request reaches the handler.
				assert.LessOrEqual(t, int(calls.Load()), wantAttempts)
			} else {
				assert.Equal(t, wantAttempts, int(calls.Load()))
			}
			assert.LessOrEqual(t, int(calls.Load()), retryBound, "within the documented bound")
			t.Logf("%s: 1 caller request, %d SDK tries, %d upstream calls (bound %d), turns %v; the SDK saw: %.80s",
				tt.name, tt.tries, calls.Load(), retryBound, kinds, err)
		})
	}
}

// An SDK that says a call is its retry (X-Stainless-Retry-Count above 0,
// or an Idempotency-Key seen before), or a call after one that failed
// upstream, gets one upstream attempt; the rollout's next success gives
// calls their full attempts back.
func TestCallerRetriesAreNotMultiplied(t *testing.T) {
	var calls atomic.Int32
	var down atomic.Bool
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if down.Load() {
			writeJSON(w, http.StatusServiceUnavailable, `{"error":{"message":"down"}}`)
			return
		}
		writeJSON(w, http.StatusOK, toolCompletion)
	})
	f := newFixture(t, up.URL, nil)
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	steps := []struct {
		name   string
		down   bool
		header []string
		want   int32 // upstream calls
		retry  bool
	}{
		{"the SDK's retry", true, []string{"X-Stainless-Retry-Count", "1"}, 1, true},
		{"a success", false, []string{"X-Stainless-Retry-Count", "0", "Idempotency-Key", "k1"}, 1, true},
		{"a repeated Idempotency-Key", true, []string{"Idempotency-Key", "k1"}, 1, true},
		{"a new call after a failed one", true, nil, 1, true},
		{"a success", false, nil, 1, true},
		{"a first try", true, []string{"X-Stainless-Retry-Count", "0", "Idempotency-Key", "k2"}, providers.DefaultMaxAttempts, false},
	}
	for _, st := range steps {
		down.Store(st.down)
		before := calls.Load()
		req, err := http.NewRequest(http.MethodPost, f.slot.LocalURL+"/v1/chat/completions", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+f.slot.Secret)
		for i := 0; i+1 < len(st.header); i += 2 {
			req.Header.Set(st.header[i], st.header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		turn := <-f.recorded
		assert.Equal(t, st.want, calls.Load()-before, "%s: upstream calls", st.name)
		if st.down {
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, st.name)
			assert.Equal(t, st.retry, turn.CallerRetry, st.name)
		} else {
			assert.Equal(t, http.StatusOK, resp.StatusCode, st.name)
		}
	}
}

// The bound holds for a real SDK: a persistently failing provider costs a
// model call of openai-go with its default retries MaxAttempts + 2 upstream
// calls, not MaxAttempts × 3.
func TestRetryBoundWithOpenAISDK(t *testing.T) {
	var calls atomic.Int32
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		writeJSON(w, http.StatusServiceUnavailable, `{"error":{"message":"overloaded","type":"server_error"}}`)
	})
	f := newFixture(t, up.URL, nil)
	sdk := openai.NewClient(option.WithBaseURL(f.slot.LocalURL+"/v1/"), option.WithAPIKey(f.slot.Secret))
	_, err := sdk.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusServiceUnavailable, apiErr.StatusCode)
	f.turns(t, 1+sdkRetries)
	assert.Equal(t, int32(retryBound), calls.Load())
	t.Logf("503 for ever: 1 model call, %d SDK tries, %d upstream calls (was %d)", 1+sdkRetries, calls.Load(), providers.DefaultMaxAttempts*(1+sdkRetries))
}

// The translate arm gets the same retries: a cut answer is tried again
// before the caller sees a byte.
func TestTranslateRetriesACutAnswer(t *testing.T) {
	var calls atomic.Int32
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "400")
			_, _ = io.WriteString(w, toolCompletion[:100])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		writeJSON(w, http.StatusOK, toolCompletion)
	})
	f := dialectFixture(t, dialects.NameChat, up.URL+"/v1", nil)
	ac := f.anthropic(f.slot.Secret)
	msg, err := ac.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "m", MaxTokens: 10, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	require.NoError(t, err)
	require.NotEmpty(t, msg.Content)
	assert.Equal(t, "add", msg.Content[len(msg.Content)-1].Name)
	turn := f.turn(t)
	assert.Equal(t, 2, turn.Attempts)
	assert.Empty(t, turn.UpstreamFailure)
	assert.Equal(t, int32(2), calls.Load())
}

// A translated answer that cannot be read is the provider's failure: the
// caller gets a 502 in its dialect.
func TestTranslateUnreadableAnswerIsAnUpstreamFailure(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, `{"choices":"none"}`)
	})
	f := dialectFixture(t, dialects.NameChat, up.URL+"/v1", nil)
	ac := f.anthropic(f.slot.Secret)
	_, err := ac.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "m", MaxTokens: 10, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var apiErr *anthropic.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadGateway, apiErr.StatusCode)
	assert.Contains(t, apiErr.RawJSON(), `"api_error"`)
	turn := f.turn(t)
	assert.Equal(t, trace.UpstreamBadAnswer, turn.UpstreamFailure)
}

// A relayed 200 that is framed as JSON but does not parse reaches the
// caller as it came; its turn records it as the provider's failure when it
// is read.
func TestRelayedMalformedAnswerIsAnUpstreamFailure(t *testing.T) {
	const answer = `{"id":"c","choices":[{"index":0,,}]}`
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, answer)
	})
	f := newFixture(t, up.URL, nil)
	resp, got := f.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, false)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, answer, got)
	turn := f.turn(t)
	assert.Equal(t, trace.UpstreamBadAnswer, turn.UpstreamFailure, turn.Error)
}

// A body that drips in slower than the body read timeout gets a 408 in the
// route's dialect, and the connection is closed: a caller holding a secret
// cannot hold a handler for ever.
func TestSlowRequestBodyTimesOut(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a body that never arrived reached the upstream")
	})
	for _, tt := range []struct {
		path, auth string
		anthropic  bool
	}{
		{"/v1/chat/completions", "Authorization: Bearer ", false},
		{"/v1/messages", "X-Api-Key: ", true},
	} {
		t.Run(tt.path, func(t *testing.T) {
			f := newFixture(t, up.URL, func(c *interception.Config) { c.BodyReadTimeout = 100 * time.Millisecond })
			conn, err := net.Dial("tcp", strings.TrimPrefix(f.slot.LocalURL, "http://"))
			require.NoError(t, err)
			defer conn.Close()
			// The deadline only turns a server that waits for ever into a failure.
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(time.Minute)))
			_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\n%s%s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{",
				tt.path, tt.auth, f.slot.Secret)
			require.NoError(t, err)
			stop := make(chan struct{})
			defer close(stop)
			go func() { // a byte at a time, until the server hangs up
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						if _, err := conn.Write([]byte(" ")); err != nil {
							return
						}
					}
				}
			}()
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err, "the server closes the connection after its answer")
			assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
			var shape struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(body, &shape), string(body))
			assert.Equal(t, tt.anthropic, shape.Type == "error", string(body))
			assert.Contains(t, shape.Error.Message, "did not arrive within 100ms")
			turn := f.turn(t)
			assert.Equal(t, http.StatusRequestTimeout, turn.Status)
			assert.Empty(t, turn.UpstreamFailure, "the caller's fault, not the provider's")
		})
	}
}

// A body read in time is not cut short by the timeout afterwards: the
// connection stays usable, and a caller that hangs up later is still
// noticed.
func TestBodyReadTimeoutEndsWithTheBody(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		select { // answer once the body read timeout, started before, has passed
		case <-time.After(50 * time.Millisecond):
		case <-r.Context().Done():
		}
		writeJSON(w, http.StatusOK, toolCompletion)
	})
	f := newFixture(t, up.URL, func(c *interception.Config) { c.BodyReadTimeout = 10 * time.Millisecond })
	_, err := f.client(f.slot.Secret).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	require.NoError(t, err)
	turn := f.turn(t)
	assert.Equal(t, http.StatusOK, turn.Status)
	assert.Empty(t, turn.Error)
}

// A caller that hangs up in the middle of a stream is not a provider
// failure: its turn says the client left, and names no upstream failure
// that would make the rollout an outage.
func TestCallerHangingUpIsNotAnUpstreamFailure(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = fmt.Fprintf(w, "data: %s\n\n", firstChunk)
		_ = http.NewResponseController(w).Flush()
		hang(r)
	})
	f := newFixture(t, up.URL, nil)
	sdk := openai.NewClient(option.WithBaseURL(f.slot.LocalURL+"/v1/"), option.WithAPIKey(f.slot.Secret))
	ctx, cancel := context.WithCancel(context.Background())
	s := sdk.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	require.True(t, s.Next(), "the first event arrives: %v", s.Err())
	cancel()
	for s.Next() {
	}
	_ = s.Close()

	turn := f.turn(t)
	assert.Equal(t, "client closed request", turn.Error)
	assert.Empty(t, turn.UpstreamFailure, "the caller left; the provider did not fail")
}

// A rollout's calls end (its harness stopped at its timeout) while a call
// still waits on a provider that has not answered: Finish reports it, a
// turn never answered, so that the rollout's end is read as the provider's
// hang, not as an agent that made no call.
func TestFinishReportsACallStillWaitingOnTheProvider(t *testing.T) {
	arrived := make(chan struct{})
	up := upstream(t, func(_ http.ResponseWriter, r *http.Request) {
		close(arrived)
		hang(r)
	})
	f := newFixture(t, up.URL, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := f.client(f.slot.Secret).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "m",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		done <- err
	}()
	<-arrived

	turns, ok := f.slot.Finish()
	require.True(t, ok)
	require.Len(t, turns, 1, "the call still waiting is a turn")
	assert.Equal(t, 499, turns[0].Status)
	assert.Equal(t, "no answer from the model provider when the harness ended", turns[0].Error)
	assert.Empty(t, turns[0].UpstreamFailure, "the provider failed nothing yet")
	assert.Zero(t, turns[0].TTFT, "no byte of an answer")
	assert.Equal(t, "/v1/chat/completions", turns[0].Route)

	cancel()
	require.Error(t, <-done)
}
