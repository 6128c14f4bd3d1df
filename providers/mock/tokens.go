package mock

import (
	"unicode/utf8"

	"github.com/evalflow/evalflow/dialects"
)

// The mock's token-level data, returned when a chat request asks for it
// (logprobs, top_logprobs, vLLM's return_token_ids): one token per
// character of the text, its id the character's code point, so tests can
// tell what ids a text has. The prompt's text is every message's text and
// tool calls, in order; the completion's is the content, then each tool
// call's name and arguments. Log probabilities are made up from the
// token's position, deterministic.

// logprobs is a choice's logprobs object, its tokens as the dialects
// write them.
type logprobs struct {
	Content []dialects.TokenLogprob `json:"content"`
}

// TokenIDs is the mock's tokenization of s: one id per character, its code
// point.
func TokenIDs(s string) []int32 {
	ids := make([]int32, 0, utf8.RuneCountInString(s))
	for _, r := range s {
		ids = append(ids, r)
	}
	return ids
}

// Logprob is the log probability the mock gives the completion token at
// position i.
func Logprob(i int) float64 {
	return -float64(i%8+1) / 16
}

// messageText is the text the mock tokenizes of a message in a prompt:
// its text, then each tool call's name and arguments.
func messageText(m chatMessage) string {
	s := m.text()
	for _, tc := range m.ToolCalls {
		s += tc.Function.Name + tc.Function.Arguments
	}
	return s
}

// promptTokenIDs are the ids of req's prompt: the ones the request gave
// (/v1/chat/completions/tokens), else the mock's tokenization of its
// messages (promptIDs).
func (m *Model) promptTokenIDs(req chatRequest) []int32 {
	if req.promptTokens != nil {
		return req.promptTokens
	}
	return m.promptIDs(req.Messages)
}

// completionText is the text the mock tokenizes as rep's completion.
func completionText(rep reply) string {
	s := rep.content
	for _, tc := range rep.toolCalls {
		s += tc.name + tc.arguments
	}
	return s
}

// tokenData is the token-level data of text, whose first token is the
// completion's token numbered at: its ids when req returns them, its
// logprobs when req asks for them.
func tokenData(req chatRequest, text string, at int) ([]int32, *logprobs) {
	var ids []int32
	if req.ReturnTokenIDs {
		ids = TokenIDs(text)
	}
	if !req.Logprobs {
		return ids, nil
	}
	lp := &logprobs{Content: []dialects.TokenLogprob{}}
	i := at
	for _, r := range text {
		tok := string(r)
		t := dialects.TokenLogprob{Token: tok, Logprob: Logprob(i), Bytes: byteInts(tok), Top: []dialects.TopLogprob{}}
		for k := range req.TopLogprobs {
			alt := tok
			if k > 0 {
				alt = string(r + rune(k))
			}
			t.Top = append(t.Top, dialects.TopLogprob{Token: alt, Logprob: Logprob(i) - float64(k), Bytes: byteInts(alt)})
		}
		lp.Content = append(lp.Content, t)
		i++
	}
	return ids, lp
}

func byteInts(s string) []int {
	out := make([]int, len(s))
	for i := range len(s) {
		out[i] = int(s[i])
	}
	return out
}
