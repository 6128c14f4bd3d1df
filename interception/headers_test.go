package interception_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/providers/mock"
)

// The beta headers callers send, and the request id the upstream answers
// with.
const (
	openAIBeta    = "responses=experimental"
	anthropicBeta = "interleaved-thinking-2025-05-14"
	upstreamID    = "req_upstream_1"
)

// requestIDHeaderOf is where a dialect's family names a call.
func requestIDHeaderOf(dialect string) string {
	if dialect == dialects.NameAnthropic {
		return "Request-Id"
	}
	return "X-Request-Id"
}

// seenHeaders keeps the request headers an upstream got.
type seenHeaders struct {
	mu  sync.Mutex
	got []http.Header
}

func (s *seenHeaders) last() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[len(s.got)-1]
}

// headerUpstream is the mock model, speaking every dialect, that keeps
// the headers of its calls and names each call in the request id header
// of the family of upstreamDialect. It returns its /v1 URL.
func headerUpstream(t *testing.T, upstreamDialect string) (string, *seenHeaders) {
	t.Helper()
	m, err := mock.New(mock.Config{})
	require.NoError(t, err)
	seen := &seenHeaders{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.mu.Lock()
		seen.got = append(seen.got, r.Header.Clone())
		seen.mu.Unlock()
		w.Header().Set(requestIDHeaderOf(upstreamDialect), upstreamID)
		m.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1", seen
}

// callWithBeta makes one call in the caller's dialect with its official
// SDK and its family's beta header, and returns the headers of the answer
// the SDK got.
func callWithBeta(t *testing.T, f fixture, caller string, stream bool) http.Header {
	t.Helper()
	ctx := context.Background()
	var resp *http.Response
	switch caller {
	case dialects.NameAnthropic:
		c := anthropic.NewClient(aoption.WithBaseURL(f.slot.LocalURL), aoption.WithAPIKey(f.slot.Secret), aoption.WithMaxRetries(0),
			aoption.WithHeader("anthropic-beta", anthropicBeta), aoption.WithResponseInto(&resp))
		p := anthropic.MessageNewParams{Model: "m", MaxTokens: 64, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(question))}}
		if stream {
			s := c.Messages.NewStreaming(ctx, p)
			for s.Next() {
			}
			require.NoError(t, s.Err())
		} else {
			_, err := c.Messages.New(ctx, p)
			require.NoError(t, err)
		}
	default:
		c := openai.NewClient(option.WithBaseURL(f.slot.LocalURL+"/v1/"), option.WithAPIKey(f.slot.Secret), option.WithMaxRetries(0),
			option.WithHeader("OpenAI-Beta", openAIBeta), option.WithResponseInto(&resp))
		chat := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)}}
		resp2 := responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(question)}}
		var err error
		switch {
		case caller == dialects.NameChat && stream:
			s := c.Chat.Completions.NewStreaming(ctx, chat)
			for s.Next() {
			}
			err = s.Err()
		case caller == dialects.NameChat:
			_, err = c.Chat.Completions.New(ctx, chat)
		case stream:
			s := c.Responses.NewStreaming(ctx, resp2)
			for s.Next() {
			}
			err = s.Err()
		default:
			_, err = c.Responses.New(ctx, resp2)
		}
		require.NoError(t, err)
	}
	require.NotNil(t, resp, "the SDK's answer")
	return resp.Header
}

// TestHeadersCarriedAcross: relayed or translated, streamed or not, the
// SDK caller finds the upstream's request id in its family's header, and
// the upstream gets the caller's beta header when it is of the caller's
// family (relayed, or translated between chat and Responses), never when
// translated to the other family.
func TestHeadersCarriedAcross(t *testing.T) {
	for _, up := range []string{dialects.NameChat, dialects.NameResponses, dialects.NameAnthropic} {
		url, seen := headerUpstream(t, up)
		f := dialectFixture(t, up, url, nil)
		for _, caller := range []string{dialects.NameChat, dialects.NameResponses, dialects.NameAnthropic} {
			for _, stream := range []bool{false, true} {
				h := callWithBeta(t, f, caller, stream)
				what := caller + " caller, " + up + " upstream"
				if stream {
					what += ", streamed"
				}
				assert.Equal(t, upstreamID, h.Get(requestIDHeaderOf(caller)), "%s: the caller's request id header", what)
				assert.Equal(t, upstreamID, h.Get(requestIDHeaderOf(up)), "%s: the upstream's request id header", what)
				sameFamily := (caller == dialects.NameAnthropic) == (up == dialects.NameAnthropic)
				got := seen.last()
				if caller == dialects.NameAnthropic {
					assert.Equal(t, sameFamily, got.Get("Anthropic-Beta") == anthropicBeta, "%s: anthropic-beta forwarded", what)
				} else {
					assert.Equal(t, sameFamily, got.Get("Openai-Beta") == openAIBeta, "%s: openai-beta forwarded", what)
				}
			}
		}
	}
}

// TestRequestIDOnATranslatedRefusal: an upstream's refusal of a
// translated call reaches the caller's SDK in its own error shape, with
// the upstream's request id.
func TestRequestIDOnATranslatedRefusal(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", upstreamID)
		writeJSON(w, http.StatusBadRequest, `{"error":{"message":"bad request","type":"invalid_request_error","code":null}}`)
	})
	f := dialectFixture(t, dialects.NameChat, up.URL+"/v1", nil)
	c := f.anthropic(f.slot.Secret)
	_, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "m", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(question))}})
	var aerr *anthropic.Error
	require.ErrorAs(t, err, &aerr)
	assert.Equal(t, http.StatusBadRequest, aerr.StatusCode)
	assert.EqualValues(t, "invalid_request_error", aerr.Type())
	assert.Equal(t, upstreamID, aerr.Response.Header.Get("Request-Id"))
}
