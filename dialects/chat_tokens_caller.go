package dialects

import (
	"bytes"
	"encoding/json"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

// CallerTokens is what a chat caller itself asked of the token-level data
// that a traced call asks the upstream for (OverlayChatTokens). The
// caller's answer is trimmed to it (Trim), so that tracing changes nothing
// the caller sees.
type CallerTokens struct {
	// Logprobs and TopLogprobs are the caller's logprobs and top_logprobs.
	Logprobs    bool
	TopLogprobs int
	// TokenIDs is the caller's return_token_ids (vLLM's).
	TokenIDs bool
	// asked is the top_logprobs the upstream was asked for.
	asked int
}

// callerTokens reads what a chat request body, valid JSON, asks of the
// token-level data: the last of a repeated key, as decoders read it.
func callerTokens(body []byte) CallerTokens {
	ms, _ := jsonwire.Members(body, 0)
	var c CallerTokens
	for _, m := range ms {
		v := body[m.Value.Start:m.Value.End]
		switch m.Key {
		case "logprobs":
			c.Logprobs = bytes.Equal(v, []byte("true"))
		case "return_token_ids":
			c.TokenIDs = bytes.Equal(v, []byte("true"))
		case "top_logprobs":
			c.TopLogprobs = 0
			_ = json.Unmarshal(v, &c.TopLogprobs)
		}
	}
	return c
}

// Trims reports whether the upstream's answer holds more than the caller
// asked for: whether Trim changes anything.
func (c CallerTokens) Trims() bool {
	return !c.Logprobs || !c.TokenIDs || c.asked > c.TopLogprobs
}

// Trim returns a chat completion, or a chunk of a stream, as the caller
// would have had it without tracing: without the token ids it did not
// ask for (prompt_token_ids, choices[].token_ids), with a choice's
// logprobs null when it asked for none, and with each position's
// top_logprobs cut to the count it asked for. Every other byte is kept;
// what is no JSON object (an SSE [DONE]) is returned as it is.
func (c CallerTokens) Trim(answer []byte) []byte {
	if !c.Trims() || !json.Valid(answer) {
		return answer
	}
	top, err := jsonwire.Members(answer, 0)
	if err != nil {
		return answer
	}
	var edits []jsonwire.Edit
	if !c.TokenIDs {
		edits = jsonwire.Remove(top, named("prompt_token_ids"))
	}
	for _, choice := range elementsOf(answer, top, "choices") {
		ms, err := jsonwire.Members(answer, choice.Start)
		if err != nil {
			continue
		}
		if !c.TokenIDs {
			edits = append(edits, jsonwire.Remove(ms, named("token_ids"))...)
		}
		for _, m := range ms {
			switch {
			case m.Key != "logprobs":
			case !c.Logprobs:
				edits = append(edits, jsonwire.Edit{Span: m.Value, Text: []byte("null")})
			default:
				edits = append(edits, c.trimAlternatives(answer, m.Value)...)
			}
		}
	}
	return jsonwire.Apply(answer, edits)
}

// trimAlternatives cuts the top_logprobs of every position of a choice's
// logprobs (at), content and refusal alike, to the caller's count.
func (c CallerTokens) trimAlternatives(b []byte, at jsonwire.Span) []jsonwire.Edit {
	lp, err := jsonwire.Members(b, at.Start)
	if err != nil { // null
		return nil
	}
	var edits []jsonwire.Edit
	positions := append(elementsOf(b, lp, "content"), elementsOf(b, lp, "refusal")...)
	for _, p := range positions {
		ms, err := jsonwire.Members(b, p.Start)
		if err != nil {
			continue
		}
		for _, alts := range elementsIn(b, ms, "top_logprobs") {
			switch n := c.TopLogprobs; {
			case len(alts.elems) <= n:
			case n == 0:
				edits = append(edits, jsonwire.Edit{Span: alts.at, Text: []byte("[]")})
			default:
				edits = append(edits, jsonwire.Edit{Span: jsonwire.Span{Start: alts.elems[n-1].End, End: alts.elems[len(alts.elems)-1].End}})
			}
		}
	}
	return edits
}

// array is an array member's value, at, and its elements.
type array struct {
	at    jsonwire.Span
	elems []jsonwire.Span
}

// elementsIn lists the arrays of the members named key of ms (more than
// one when the key repeats); values that are no arrays are skipped.
func elementsIn(b []byte, ms []jsonwire.Member, key string) []array {
	var out []array
	for _, m := range ms {
		if m.Key != key {
			continue
		}
		if es, err := jsonwire.Elements(b, m.Value.Start); err == nil {
			out = append(out, array{m.Value, es})
		}
	}
	return out
}

// elementsOf is the elements of every array member named key of ms.
func elementsOf(b []byte, ms []jsonwire.Member, key string) []jsonwire.Span {
	var out []jsonwire.Span
	for _, a := range elementsIn(b, ms, key) {
		out = append(out, a.elems...)
	}
	return out
}

// named picks the members named key.
func named(key string) func(jsonwire.Member) bool {
	return func(m jsonwire.Member) bool { return m.Key == key }
}
