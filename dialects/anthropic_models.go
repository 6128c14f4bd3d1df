package dialects

import "net/http"

// anthropicModel is Anthropic's model object.
type anthropicModel struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

func anthropicModelOf(id string) anthropicModel {
	return anthropicModel{Type: "model", ID: id, DisplayName: id, CreatedAt: "1970-01-01T00:00:00Z"}
}

// WriteModels answers with Anthropic's model list, one page holding every
// model: {"data":[...],"has_more":false,"first_id","last_id"}.
func (anthropicDialect) WriteModels(w http.ResponseWriter, ids []string) {
	list := struct {
		Data    []anthropicModel `json:"data"`
		HasMore bool             `json:"has_more"`
		FirstID *string          `json:"first_id"`
		LastID  *string          `json:"last_id"`
	}{Data: []anthropicModel{}}
	for _, id := range ids {
		list.Data = append(list.Data, anthropicModelOf(id))
	}
	if len(ids) > 0 {
		list.FirstID, list.LastID = &ids[0], &ids[len(ids)-1]
	}
	writeJSON(w, list)
}

// WriteModel answers with Anthropic's model object, as GET
// /v1/models/{model_id} returns it.
func (anthropicDialect) WriteModel(w http.ResponseWriter, id string) {
	writeJSON(w, anthropicModelOf(id))
}
