package dialects_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
)

// A streamed request reads back as the same request, streaming, and a
// chat upstream is asked for the usage it sends only when asked.
func TestEncodeStreamRequest(t *testing.T) {
	req := dialects.Request{Model: "m", Messages: []dialects.Message{
		{Role: dialects.RoleUser, Content: []dialects.Part{{Type: dialects.PartText, Text: "hi"}}}}}
	for _, d := range dialects.All {
		t.Run(d.Name(), func(t *testing.T) {
			body, err := dialects.EncodeStreamRequest(d, req)
			require.NoError(t, err)
			var fields map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(body, &fields), "EncodeStreamRequest = %s", body)
			assert.JSONEq(t, `true`, string(fields["stream"]))
			if d.Name() == dialects.NameChat {
				assert.JSONEq(t, `{"include_usage":true}`, string(fields["stream_options"]))
			} else {
				assert.NotContains(t, fields, "stream_options")
			}
			back, err := d.ParseRequest(body)
			require.NoError(t, err)
			assert.True(t, back.Stream)
			assert.Equal(t, "hi", back.Messages[0].Text())
		})
	}
}
