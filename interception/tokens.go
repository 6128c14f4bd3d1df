package interception

import (
	"github.com/evalflow/evalflow/dialects"
)

// Token-level data (Rollout.Tokens) is asked of chat completions upstreams
// only, the dialect vLLM and SGLang serve it in: a relayed chat call gets
// the fields overlaid on its body, a translated call to a chat upstream
// gets them on the encoded request, and the answer's token ids and
// log probabilities are recorded on the turn (trace.Turn.Tokens). Without
// Rollout.Tokens nothing of the request changes.

// tokensFor is the token request for a call in dialect d to the upstream,
// or nil when none is made.
func tokensFor(r Rollout, d dialects.Dialect) *dialects.TokenRequest {
	if r.Tokens == nil || d.Name() != dialects.NameChat {
		return nil
	}
	return r.Tokens
}

// withTokenFields asks the upstream for token-level data on body, a chat
// completions request, when the rollout records it.
func withTokenFields(r Rollout, d dialects.Dialect, body dialects.Body) (dialects.Body, error) {
	t := tokensFor(r, d)
	if t == nil {
		return body, nil
	}
	return dialects.OverlayChatTokens(body.Bytes(), *t)
}

// tokenStream gathers a relayed chat stream's token-level data when the
// rollout records it; nil otherwise.
func tokenStream(r Rollout, d dialects.Dialect) *dialects.ChatTokenStream {
	if tokensFor(r, d) == nil {
		return nil
	}
	return &dialects.ChatTokenStream{}
}

// answerTokens reads a whole chat answer's token-level data when the
// rollout records it.
func answerTokens(r Rollout, d dialects.Dialect, answer []byte) *dialects.Tokens {
	if tokensFor(r, d) == nil {
		return nil
	}
	return dialects.ChatTokens(answer)
}
