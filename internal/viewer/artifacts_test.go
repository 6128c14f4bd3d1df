package viewer_test

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/viewer"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
)

// TestNoSecretInArtifacts: a credential in a text artifact is redacted as
// in a harness's output, and the provider's key is taken out of a binary
// artifact's bytes too, where it is not found as text.
func TestNoSecretInArtifacts(t *testing.T) {
	srv := serve(t)
	var r viewer.Rollout
	getJSON(t, srv, "/api/runs/"+evalRun+"/rollout?key="+url.QueryEscape(rollout.Key(evalRun, 0, 2, 0)), &r)
	require.Len(t, r.Attempts, 2)
	got := map[string]trace.Artifact{}
	for _, a := range r.Attempts[1].Artifacts {
		got[a.Path] = a
	}
	assert.Equal(t, "all checks passed\nOPENAI_API_KEY=[redacted]\n", got["report.txt"].Content)
	blob, err := base64.StdEncoding.DecodeString(got["blob.bin"].Content)
	require.NoError(t, err)
	assert.NotContains(t, string(blob), providerKey)
	assert.Contains(t, string(blob), "[redacted]")
	pic, err := base64.StdEncoding.DecodeString(got["charts/plot.png"].Content)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(pic, []byte("\x89PNG")), "a picture without a secret is served as it is")
}
