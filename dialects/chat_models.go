package dialects

import (
	"encoding/json"
	"net/http"
)

// openAIModel is OpenAI's model object.
type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func openAIModelOf(id string) openAIModel {
	return openAIModel{ID: id, Object: "model", OwnedBy: "evalflow"}
}

// WriteModels answers with OpenAI's model list, {"object":"list","data":[...]}.
func (chatDialect) WriteModels(w http.ResponseWriter, ids []string) {
	list := struct {
		Object string        `json:"object"`
		Data   []openAIModel `json:"data"`
	}{Object: "list", Data: []openAIModel{}}
	for _, id := range ids {
		list.Data = append(list.Data, openAIModelOf(id))
	}
	writeJSON(w, list)
}

// WriteModel answers with OpenAI's model object, as GET /v1/models/{id}
// returns it.
func (chatDialect) WriteModel(w http.ResponseWriter, id string) { writeJSON(w, openAIModelOf(id)) }

// writeJSON answers 200 with v as JSON.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
