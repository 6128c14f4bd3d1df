package mock_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/providers/mock/mocktest"
)

// The mock names the policy version that answered in the header it is
// told, and a test moves the version between calls.
func TestMockSendsTheCurrentPolicyVersion(t *testing.T) {
	m, url := mocktest.Serve(t, mock.Config{PolicyVersionHeader: "x-policy-version"})
	client := openai.NewClient(option.WithBaseURL(url+"/"), option.WithAPIKey("test-key"), option.WithMaxRetries(0))
	versionOf := func() string {
		t.Helper()
		var resp *http.Response
		_, err := client.Chat.Completions.New(context.Background(),
			params(false, openai.UserMessage(question)), option.WithResponseInto(&resp))
		require.NoError(t, err)
		return resp.Header.Get("X-Policy-Version")
	}

	require.Empty(t, versionOf(), "no version before one is set")
	m.SetPolicyVersion(3)
	require.Equal(t, "3", versionOf())
	m.SetPolicyVersion(4)
	require.Equal(t, "4", versionOf())

	plain, err := mock.New(mock.Config{})
	require.NoError(t, err)
	plain.SetPolicyVersion(5)
	rec := httptest.NewRecorder()
	plain.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/models", nil))
	require.Empty(t, rec.Header().Get("X-Policy-Version"), "without a header name, no header")
}
