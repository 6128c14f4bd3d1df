package dialects_test

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/evalflow/evalflow/dialects"
)

func TestWriteModels(t *testing.T) {
	const openAI = `{"object":"list","data":[{"id":"a","object":"model","created":0,"owned_by":"evalflow"},{"id":"b","object":"model","created":0,"owned_by":"evalflow"}]}` + "\n"
	tests := []struct {
		d    dialects.Dialect
		ids  []string
		want string
	}{
		{dialects.Chat, []string{"a", "b"}, openAI},
		{dialects.Responses, []string{"a", "b"}, openAI},
		{dialects.Chat, nil, `{"object":"list","data":[]}` + "\n"},
		{dialects.Anthropic, []string{"a", "b"}, `{"data":[{"type":"model","id":"a","display_name":"a","created_at":"1970-01-01T00:00:00Z"},` +
			`{"type":"model","id":"b","display_name":"b","created_at":"1970-01-01T00:00:00Z"}],"has_more":false,"first_id":"a","last_id":"b"}` + "\n"},
		{dialects.Anthropic, nil, `{"data":[],"has_more":false,"first_id":null,"last_id":null}` + "\n"},
	}
	for _, tt := range tests {
		w := httptest.NewRecorder()
		tt.d.WriteModels(w, tt.ids)
		assert.Equal(t, tt.want, w.Body.String(), "%s.WriteModels(%q)", tt.d.Name(), tt.ids)
		assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
		assert.Equal(t, 200, w.Code)
	}
}

func TestWriteModel(t *testing.T) {
	tests := []struct {
		d    dialects.Dialect
		want string
	}{
		{dialects.Chat, `{"id":"Qwen/Qwen3-8B","object":"model","created":0,"owned_by":"evalflow"}` + "\n"},
		{dialects.Responses, `{"id":"Qwen/Qwen3-8B","object":"model","created":0,"owned_by":"evalflow"}` + "\n"},
		{dialects.Anthropic, `{"type":"model","id":"Qwen/Qwen3-8B","display_name":"Qwen/Qwen3-8B","created_at":"1970-01-01T00:00:00Z"}` + "\n"},
	}
	for _, tt := range tests {
		w := httptest.NewRecorder()
		tt.d.WriteModel(w, "Qwen/Qwen3-8B")
		assert.Equal(t, tt.want, w.Body.String(), "%s.WriteModel", tt.d.Name())
		assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
		assert.Equal(t, 200, w.Code)
	}
}
