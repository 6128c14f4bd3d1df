package mock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"unicode/utf8"
)

// MaxModelLen is the context length the mock's /tokenize reports.
const MaxModelLen = 32768

// mergeBase is where the ids of merged letter pairs start (TokenMerge):
// above every code point, so no character's id is a pair's.
const mergeBase = 0x110000

// tokenizeRequest is the body of POST /tokenize, as vLLM takes it: a chat
// conversation rendered through the model's template, or a plain prompt.
type tokenizeRequest struct {
	Model               string        `json:"model"`
	Messages            []chatMessage `json:"messages"`
	Tools               []chatTool    `json:"tools"`
	AddGenerationPrompt *bool         `json:"add_generation_prompt"`
	Prompt              *string       `json:"prompt"`
}

// serveTokenize answers POST /tokenize (and /v1/tokenize) with the mock's
// tokenization of the messages, as a chat prompt, or of the prompt text.
func (m *Model) serveTokenize(w http.ResponseWriter, r *http.Request) {
	var req tokenizeRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 32<<20)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid request body: %v", err))
		return
	}
	var ids []int32
	switch {
	case req.Prompt != nil && req.Messages != nil:
		writeError(w, http.StatusBadRequest, "give either messages or prompt, not both")
		return
	case req.Prompt != nil:
		ids = TokenIDs(*req.Prompt)
	case len(req.Messages) > 0:
		ids = m.promptIDs(req.Messages)
	default:
		writeError(w, http.StatusBadRequest, "messages or prompt is required")
		return
	}
	if ids == nil {
		ids = []int32{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"count": len(ids), "max_model_len": MaxModelLen, "tokens": ids})
}

// tokensRequest is the part of a POST /v1/chat/completions/tokens body
// beyond a chat request: the prompt as token ids.
type tokensRequest struct {
	Tokens []int32 `json:"tokens"`
}

// serveChatTokens answers POST /v1/chat/completions/tokens, prime-rl's
// vLLM route: a chat completions body whose prompt is given as token ids
// in "tokens". The answer is the chat answer to the messages; the
// prompt's ids it reports are the given ones.
func (m *Model) serveChatTokens(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 32<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid request body: %v", err))
		return
	}
	var tr tokensRequest
	if err := json.Unmarshal(body, &tr); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid request body: tokens: %v", err))
		return
	}
	if len(tr.Tokens) == 0 {
		writeError(w, http.StatusBadRequest, "tokens must be a non-empty array of token ids")
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	m.serveChatWith(w, r, tr.Tokens)
}

// promptIDs is the mock's tokenization of a conversation as a chat
// prompt: every message's text and tool calls in order (messageText), one
// id per character, except that with TokenMerge an assistant message's
// adjacent ASCII letter pairs are one id each, as a BPE vocabulary's
// merges make a re-tokenized text differ from the ids sampled one at a
// time.
func (m *Model) promptIDs(msgs []chatMessage) []int32 {
	var ids []int32
	for _, msg := range msgs {
		text := messageText(msg)
		if m.cfg.TokenMerge && msg.Role == "assistant" {
			ids = append(ids, mergedIDs(text)...)
			continue
		}
		ids = append(ids, TokenIDs(text)...)
	}
	return ids
}

// mergedIDs tokenizes s merging each pair of adjacent ASCII letters, left
// to right, into one id above every code point.
func mergedIDs(s string) []int32 {
	ids := make([]int32, 0, utf8.RuneCountInString(s))
	runes := []rune(s)
	for i := 0; i < len(runes); i++ {
		if i+1 < len(runes) && isLetter(runes[i]) && isLetter(runes[i+1]) {
			ids = append(ids, mergeBase+runes[i]<<8|runes[i+1])
			i++
			continue
		}
		ids = append(ids, runes[i])
	}
	return ids
}

func isLetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }
