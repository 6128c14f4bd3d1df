package dialects

import (
	"fmt"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

// overlay checks body against shape and sets model, temperature, top_p,
// the max-tokens fields maxTokens names (told which keys body has) and,
// withSeed, seed, keeping every other byte (jsonwire.Overlay): every
// dialect's overlay.
//
// The shape is the dialect's request shape (in its <dialect>_request.go):
// what its ParseRequest would refuse, found in one pass without decoding,
// before the upstream sees the body. The shapes are built from the very
// types the parsers decode into; their unions and hooks say what the
// parsers read from raw fields. FuzzRequestShape holds them to the parsers.
func overlay(dialect string, body []byte, shape *jsonwire.Shape, model string, s Sampling,
	maxTokens func(has func(string) bool) []string, withSeed bool) (Body, error) {
	out, err := jsonwire.Overlay(body, shape, func(has func(string) bool) []jsonwire.Field {
		var set []jsonwire.Field
		if model != "" {
			set = append(set, jsonwire.Field{Key: "model", Value: model})
		}
		if s.Temperature != nil {
			set = append(set, jsonwire.Field{Key: "temperature", Value: *s.Temperature})
		}
		if s.TopP != nil {
			set = append(set, jsonwire.Field{Key: "top_p", Value: *s.TopP})
		}
		if s.MaxTokens != nil {
			for _, name := range maxTokens(has) {
				set = append(set, jsonwire.Field{Key: name, Value: *s.MaxTokens})
			}
		}
		if withSeed && s.Seed != nil {
			set = append(set, jsonwire.Field{Key: "seed", Value: *s.Seed})
		}
		return set
	})
	if err != nil {
		return nil, fmt.Errorf("%s request: %w", dialect, err)
	}
	return out, nil
}

// overlaySeedless sets model, temperature, top_p and the max-tokens field
// named maxTokens: the overlay of dialects that have no seed (Anthropic,
// Responses).
func overlaySeedless(dialect string, body []byte, shape *jsonwire.Shape, model string, s Sampling, maxTokens string) (Body, error) {
	return overlay(dialect, body, shape, model, s, func(func(string) bool) []string { return []string{maxTokens} }, false)
}
