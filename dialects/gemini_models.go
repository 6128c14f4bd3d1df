package dialects

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

// geminiModel is Gemini's model object.
type geminiModel struct {
	Name                       string   `json:"name"`
	BaseModelID                string   `json:"baseModelId"`
	Version                    string   `json:"version"`
	DisplayName                string   `json:"displayName"`
	SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
}

func geminiModelOf(id string) geminiModel {
	id = strings.TrimPrefix(id, "models/")
	return geminiModel{Name: "models/" + id, BaseModelID: id, Version: "001", DisplayName: id,
		SupportedGenerationMethods: []string{"generateContent", "streamGenerateContent", "countTokens"}}
}

// WriteModels answers with Gemini's model list, one page holding every
// model: {"models":[{"name":"models/ID",…}]}.
func (geminiDialect) WriteModels(w http.ResponseWriter, ids []string) {
	list := struct {
		Models []geminiModel `json:"models"`
	}{Models: []geminiModel{}}
	for _, id := range ids {
		list.Models = append(list.Models, geminiModelOf(id))
	}
	writeJSON(w, list)
}

// WriteModel answers with Gemini's model object, as GET
// /v1beta/models/{model} returns it.
func (geminiDialect) WriteModel(w http.ResponseWriter, id string) {
	writeJSON(w, geminiModelOf(id))
}

// ParseGeminiCountTokens reads a countTokens request: its contents, or
// the generateContentRequest it wraps, as a Request.
func ParseGeminiCountTokens(body []byte) (Request, error) {
	var ct struct {
		Contents               json.RawMessage `json:"contents"`
		GenerateContentRequest json.RawMessage `json:"generateContentRequest"`
	}
	if err := jsonwire.Unmarshal(body, &ct); err != nil {
		return Request{}, fmt.Errorf("decode gemini countTokens: %w", err)
	}
	if presentJSON(ct.GenerateContentRequest) != nil {
		return geminiDialect{}.ParseRequest(ct.GenerateContentRequest)
	}
	return geminiDialect{}.ParseRequest(body)
}

// GeminiCountTokensResponse is countTokens' answer: {"totalTokens": n}.
func GeminiCountTokensResponse(total int) []byte {
	return mustJSON(map[string]int{"totalTokens": total})
}
