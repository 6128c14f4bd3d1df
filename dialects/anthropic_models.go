package dialects

import (
	"encoding/json"
	"net/http"
)

// WriteModels answers with Anthropic's model list, one page holding every
// model: {"data":[...],"has_more":false,"first_id","last_id"}.
func (anthropicDialect) WriteModels(w http.ResponseWriter, ids []string) {
	type model struct {
		Type        string `json:"type"`
		ID          string `json:"id"`
		DisplayName string `json:"display_name"`
		CreatedAt   string `json:"created_at"`
	}
	list := struct {
		Data    []model `json:"data"`
		HasMore bool    `json:"has_more"`
		FirstID *string `json:"first_id"`
		LastID  *string `json:"last_id"`
	}{Data: []model{}}
	for _, id := range ids {
		list.Data = append(list.Data, model{Type: "model", ID: id, DisplayName: id, CreatedAt: "1970-01-01T00:00:00Z"})
	}
	if len(ids) > 0 {
		list.FirstID, list.LastID = &ids[0], &ids[len(ids)-1]
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}
