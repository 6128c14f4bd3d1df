package providers

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/providers/mock/mocktest"
)

func TestRelayHeaders(t *testing.T) {
	tests := []struct {
		dialect string
		want    http.Header
	}{
		{dialects.NameChat, http.Header{"Authorization": {"Bearer up-key"}, "Openai-Beta": {"responses=v1"}, "Anthropic-Version": nil}},
		{dialects.NameResponses, http.Header{"Authorization": {"Bearer up-key"}}},
		{dialects.NameAnthropic, http.Header{"X-Api-Key": {"up-key"}, "Authorization": nil,
			"Anthropic-Beta": {"a, b"}, "Anthropic-Version": {"2023-06-01"}}},
	}
	for _, tt := range tests {
		t.Run(tt.dialect, func(t *testing.T) {
			var got http.Header
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = r.Header.Clone()
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{}`)
			}))
			defer srv.Close()
			up, err := New(tt.dialect, srv.URL+"/v1", "up-key")
			require.NoError(t, err)
			assert.Equal(t, tt.dialect, up.Dialect())
			caller := http.Header{
				"Authorization":   {"Bearer rollout-secret"},
				"X-Api-Key":       {"rollout-secret"},
				"Content-Type":    {"application/json", "application/json"},
				"Content-Length":  {"2"},
				"Connection":      {"keep-alive, X-Hop"},
				"X-Hop":           {"1"},
				"Accept-Encoding": {"gzip"},
				"Anthropic-Beta":  {"a", "b"},
				"Openai-Beta":     {"responses=v1"},
			}
			if tt.dialect != dialects.NameAnthropic {
				caller.Del("Anthropic-Beta")
			}
			resp, _, err := up.Relay(context.Background(), "/x", caller, dialects.Body{[]byte(`{}`)})
			require.NoError(t, err)
			_ = resp.Body.Close()
			for k, v := range tt.want {
				assert.Equal(t, v, got.Values(k), k)
			}
			assert.Equal(t, []string{"application/json"}, got.Values("Content-Type"), "one content type")
			assert.Empty(t, got.Get("X-Hop"), "headers named by Connection are hop-by-hop")
			for k, vs := range got {
				for _, v := range vs {
					assert.NotContains(t, v, "rollout-secret", k)
				}
			}
		})
	}
	_, err := New("gemini", "http://x", "")
	assert.Error(t, err)
}

func TestCall(t *testing.T) {
	_, url := mocktest.Serve(t, mock.Config{})
	req := dialects.Request{Model: "m", Messages: []dialects.Message{{Role: dialects.RoleUser,
		Content: []dialects.Part{{Type: dialects.PartText, Text: "What is 6 * 7?"}}}}}
	for _, d := range dialects.All {
		up, err := New(d.Name(), url, "")
		require.NoError(t, err)
		got, err := up.Call(context.Background(), req)
		require.NoError(t, err, d.Name())
		assert.Equal(t, "The answer is 42.", got.Message.Text(), d.Name())
		assert.Equal(t, dialects.FinishStop, got.FinishReason, d.Name())
	}
}

func TestCallClassifiesContextLength(t *testing.T) {
	tests := []struct {
		dialect, body string
		context       bool
	}{
		{dialects.NameChat, `{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`, true},
		{dialects.NameAnthropic, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}`, true},
		{dialects.NameResponses, `{"error":{"message":"Your input exceeds the context window of this model.","type":"invalid_request_error","code":"context_length_exceeded"}}`, true},
		{dialects.NameChat, `{"error":{"message":"bad temperature","type":"invalid_request_error"}}`, false},
	}
	for _, tt := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, tt.body)
		}))
		up, err := New(tt.dialect, srv.URL+"/v1", "")
		require.NoError(t, err)
		_, err = up.Call(context.Background(), dialects.Request{Model: "m"})
		srv.Close()
		var se *StatusError
		require.ErrorAs(t, err, &se, tt.body)
		assert.Equal(t, http.StatusBadRequest, se.Status)
		assert.Equal(t, tt.context, errors.Is(err, ErrContextLength), "Call with %s = %v", tt.body, err)
	}
}
