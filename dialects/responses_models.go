package dialects

import "net/http"

// WriteModels answers with OpenAI's model list, as chat does: the
// Responses API shares its /v1/models.
func (responsesDialect) WriteModels(w http.ResponseWriter, ids []string) {
	chatDialect{}.WriteModels(w, ids)
}

// WriteModel answers with OpenAI's model object, as chat does.
func (responsesDialect) WriteModel(w http.ResponseWriter, id string) {
	chatDialect{}.WriteModel(w, id)
}
