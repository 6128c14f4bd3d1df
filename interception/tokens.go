package interception

import (
	"github.com/evalflow/evalflow/dialects"
)

// Token-level data (Rollout.Tokens) is asked of chat completions upstreams
// only, the dialect vLLM and SGLang serve it in: a relayed chat call gets
// the fields overlaid on its body, a translated call to a chat upstream
// gets them on the encoded request, and the answer's token ids and
// log probabilities are recorded on the turn (trace.Turn.Tokens), as many
// alternatives per position as the rollout asks. A relayed caller gets the
// answer trimmed to what it asked for itself (its own logprobs,
// top_logprobs and return_token_ids): the bytes it would get without
// tracing. Without Rollout.Tokens nothing of the request or the answer
// changes, and nothing of the answer is parsed on the caller's path.

// tokensFor is the token request for a call in dialect d to the upstream,
// or nil when none is made.
func tokensFor(r Rollout, d dialects.Dialect) *dialects.TokenRequest {
	if r.Tokens == nil || d.Name() != dialects.NameChat {
		return nil
	}
	return r.Tokens
}

// withTokenFields asks the upstream for token-level data on body, a chat
// completions request, when the rollout records it. It returns what the
// caller asked for itself, when its answer holds more than that: the
// answer is trimmed to it (relay.go).
func withTokenFields(r Rollout, d dialects.Dialect, body dialects.Body) (dialects.Body, *dialects.CallerTokens, error) {
	t := tokensFor(r, d)
	if t == nil {
		return body, nil, nil
	}
	out, caller, err := dialects.OverlayChatTokens(body.Bytes(), *t)
	if err != nil || !caller.Trims() {
		return out, nil, err
	}
	return out, &caller, nil
}

// tokenStream gathers a relayed chat stream's token-level data when the
// rollout records it; nil otherwise.
func tokenStream(r Rollout, d dialects.Dialect) *dialects.ChatTokenStream {
	t := tokensFor(r, d)
	if t == nil {
		return nil
	}
	return dialects.NewChatTokenStream(*t)
}

// answerTokens reads a whole chat answer's token-level data when the
// rollout records it.
func answerTokens(r Rollout, d dialects.Dialect, answer []byte) *dialects.Tokens {
	t := tokensFor(r, d)
	if t == nil {
		return nil
	}
	return dialects.ChatTokens(answer, *t)
}
