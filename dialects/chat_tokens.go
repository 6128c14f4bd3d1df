package dialects

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

// TokenRequest is what a run asks an OpenAI-compatible chat upstream (vLLM,
// SGLang) for, to record the token-level data a trainer learns from.
type TokenRequest struct {
	// TopLogprobs is how many alternatives to return per completion token;
	// 0 returns none.
	TopLogprobs int
}

// Tokens is one model call's token-level data, kept compact: token ids as
// little-endian int32 and log probabilities as little-endian float32, each
// array base64-encoded in JSON.
type Tokens struct {
	// PromptIDs are the prompt's token ids, as the server tokenized it.
	PromptIDs TokenIDs `json:"prompt_ids,omitempty"`
	// CompletionIDs are the sampled tokens' ids.
	CompletionIDs TokenIDs `json:"completion_ids,omitempty"`
	// Logprobs is each completion token's log probability.
	Logprobs Float32s `json:"logprobs,omitempty"`
	// TopK is how many alternatives each completion position has in
	// TopTokens and TopLogprobs, position after position; 0 without them.
	TopK        int      `json:"top_k,omitempty"`
	TopTokens   []string `json:"top_tokens,omitempty"`
	TopLogprobs Float32s `json:"top_logprobs,omitempty"`
}

// Empty reports whether t holds nothing.
func (t *Tokens) Empty() bool {
	return t == nil || len(t.PromptIDs) == 0 && len(t.CompletionIDs) == 0 && len(t.Logprobs) == 0
}

// TokenIDs are token ids, in JSON the base64 of their little-endian int32s.
type TokenIDs []int32

// MarshalJSON encodes the ids as base64 of little-endian int32s.
func (ids TokenIDs) MarshalJSON() ([]byte, error) {
	return marshalPacked(ids, func(id int32) uint32 { return uint32(id) })
}

// UnmarshalJSON reads the base64 form, or a JSON array of integers.
func (ids *TokenIDs) UnmarshalJSON(data []byte) error {
	a, err := unmarshalPacked(data, "token ids", func(u uint32) int32 { return int32(u) })
	if err == nil {
		*ids = a
	}
	return err
}

// Float32s are numbers, in JSON the base64 of their little-endian float32s.
type Float32s []float32

// MarshalJSON encodes the numbers as base64 of little-endian float32s.
func (f Float32s) MarshalJSON() ([]byte, error) {
	return marshalPacked(f, math.Float32bits)
}

// UnmarshalJSON reads the base64 form, or a JSON array of numbers.
func (f *Float32s) UnmarshalJSON(data []byte) error {
	a, err := unmarshalPacked(data, "float32s", math.Float32frombits)
	if err == nil {
		*f = a
	}
	return err
}

// marshalPacked encodes xs as the base64 of their 32 bits each,
// little-endian.
func marshalPacked[T int32 | float32](xs []T, bits func(T) uint32) ([]byte, error) {
	b := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(b[4*i:], bits(x))
	}
	return json.Marshal(base64.StdEncoding.EncodeToString(b))
}

// unmarshalPacked reads what marshalPacked writes, or a JSON array of
// the values; what names them in an error.
func unmarshalPacked[T int32 | float32](data []byte, what string, from func(uint32) T) ([]T, error) {
	if len(data) > 0 && data[0] == '[' {
		var a []T
		if err := json.Unmarshal(data, &a); err != nil {
			return nil, err
		}
		return a, nil
	}
	b, err := decodePacked(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out := make([]T, len(b)/4)
	for i := range out {
		out[i] = from(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out, nil
}

// decodePacked decodes a JSON string of base64 whose length is a multiple
// of four bytes.
func decodePacked(data []byte) ([]byte, error) {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	if len(b)%4 != 0 {
		return nil, errors.New("length is not a multiple of 4 bytes")
	}
	return b, nil
}

// OverlayChatTokens sets on a chat completions body the fields that ask
// for token-level data: logprobs, top_logprobs (the larger of r's and the
// caller's own, when either asks for alternatives), and vLLM's
// return_token_ids (prompt_token_ids and choices[].token_ids in the
// answer; servers that do not know it ignore it). Every other byte of
// body is kept. It returns what the caller asked for itself, to trim its
// answer to (CallerTokens.Trim).
func OverlayChatTokens(body []byte, r TokenRequest) (Body, CallerTokens, error) {
	var caller CallerTokens
	out, err := jsonwire.Overlay(body, chatRequestShape, func(func(string) bool) []jsonwire.Field {
		caller = callerTokens(body)
		caller.asked = r.TopLogprobs
		if caller.Logprobs {
			caller.asked = max(caller.asked, caller.TopLogprobs)
		}
		set := []jsonwire.Field{{Key: "logprobs", Value: true}, {Key: "return_token_ids", Value: true}}
		if caller.asked > 0 {
			set = append(set, jsonwire.Field{Key: "top_logprobs", Value: caller.asked})
		}
		return set
	})
	if err != nil {
		return nil, CallerTokens{}, fmt.Errorf("chat request: %w", err)
	}
	return out, caller, nil
}

// OverlayChatPrompt sets on a chat completions body the prompt as token
// ids, "tokens", the field of prime-rl's /v1/chat/completions/tokens
// route; every other byte of body is kept.
func OverlayChatPrompt(body []byte, prompt []int32) (Body, error) {
	out, err := jsonwire.Overlay(body, chatRequestShape, func(func(string) bool) []jsonwire.Field {
		return []jsonwire.Field{{Key: "tokens", Value: prompt}}
	})
	if err != nil {
		return nil, fmt.Errorf("chat request: %w", err)
	}
	return out, nil
}

// chatTokensWire is the token-level part of a chat completion or chunk.
type chatTokensWire struct {
	PromptTokenIDs []int32 `json:"prompt_token_ids"`
	Choices        []struct {
		Index    int     `json:"index"`
		TokenIDs []int32 `json:"token_ids"`
		Logprobs *struct {
			Content []struct {
				Token       string  `json:"token"`
				Logprob     float64 `json:"logprob"`
				TopLogprobs []struct {
					Token   string  `json:"token"`
					Logprob float64 `json:"logprob"`
				} `json:"top_logprobs"`
			} `json:"content"`
		} `json:"logprobs"`
	} `json:"choices"`
}

// add appends w's first choice's data to t, keeping at most topK
// alternatives per position.
func (t *Tokens) add(w chatTokensWire, topK int) {
	t.PromptIDs = append(t.PromptIDs, w.PromptTokenIDs...)
	for _, c := range w.Choices {
		if c.Index != 0 {
			continue
		}
		t.CompletionIDs = append(t.CompletionIDs, c.TokenIDs...)
		if c.Logprobs == nil {
			continue
		}
		for _, lp := range c.Logprobs.Content {
			t.Logprobs = append(t.Logprobs, float32(lp.Logprob))
			if len(lp.TopLogprobs) == 0 || topK == 0 {
				continue
			}
			if t.TopK == 0 {
				t.TopK = min(len(lp.TopLogprobs), topK)
			}
			for k := range t.TopK {
				if k < len(lp.TopLogprobs) {
					t.TopTokens = append(t.TopTokens, lp.TopLogprobs[k].Token)
					t.TopLogprobs = append(t.TopLogprobs, float32(lp.TopLogprobs[k].Logprob))
				} else {
					t.TopTokens = append(t.TopTokens, "")
					t.TopLogprobs = append(t.TopLogprobs, float32(math.Inf(-1)))
				}
			}
		}
	}
}

// ChatTokens reads the token-level data r asks for of a chat completion
// body (the answer may hold more alternatives, for its caller); nil when
// it has none.
func ChatTokens(body []byte, r TokenRequest) *Tokens {
	var w chatTokensWire
	if json.Unmarshal(body, &w) != nil {
		return nil
	}
	t := &Tokens{}
	t.add(w, r.TopLogprobs)
	if t.Empty() {
		return nil
	}
	return t
}

// ChatTokenStream gathers the token-level data r asks for of a chat
// completions stream, fed one event's data at a time.
type ChatTokenStream struct {
	t Tokens
	r TokenRequest
}

// NewChatTokenStream gathers the token-level data r asks for.
func NewChatTokenStream(r TokenRequest) *ChatTokenStream { return &ChatTokenStream{r: r} }

// Add reads one event's data; events that are not chunks are skipped.
func (s *ChatTokenStream) Add(data []byte) {
	var w chatTokensWire
	if json.Unmarshal(data, &w) == nil {
		s.t.add(w, s.r.TopLogprobs)
	}
}

// Tokens is what the stream held; nil when it held none.
func (s *ChatTokenStream) Tokens() *Tokens {
	if s.t.Empty() {
		return nil
	}
	t := s.t
	return &t
}
