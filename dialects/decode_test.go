package dialects

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

// decodeTargets are the types the parsers decode documents into, each as a
// function making a fresh zero value.
var decodeTargets = map[string]func() any{
	"chatRequest":       func() any { return new(chatRequest) },
	"chatResponse":      func() any { return new(chatResponse) },
	"chatChunk":         func() any { return new(chatChunk) },
	"[]chatPart":        func() any { return new([]chatPart) },
	"[]string":          func() any { return new([]string) },
	"string":            func() any { return new(string) },
	"responsesRequest":  func() any { return new(responsesRequest) },
	"responsesResponse": func() any { return new(responsesResponse) },
	"responsesEvent":    func() any { return new(responsesEvent) },
	"[]responsesItem":   func() any { return new([]responsesItem) },
	"anthropicRequest":  func() any { return new(anthropicRequest) },
	"anthropicResponse": func() any { return new(anthropicResponse) },
	"anthropicEvent":    func() any { return new(anthropicEvent) },
	"[]anthropicBlock":  func() any { return new([]anthropicBlock) },
	"[]reasoningDetail": func() any { return new([]reasoningDetail) },
}

// TestGoldenDecodeSameAsV1: the parsers' own types take every golden
// capture through jsonwire as encoding/json v2's v1 mode does (jsonwire's
// FuzzUnmarshal holds the decode to v1 mode for types of its own).
func TestGoldenDecodeSameAsV1(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, name := range files {
		data, err := os.ReadFile(name)
		require.NoError(t, err)
		for target, zero := range decodeTargets {
			want, shared, copied := zero(), zero(), zero()
			wantErr := jsonv1.Unmarshal(data, want)
			for got, gotErr := range map[any]error{copied: jsonwire.Unmarshal(data, copied), shared: jsonwire.UnmarshalOwned(data, shared)} {
				if wantErr == nil {
					require.NoError(t, gotErr, "%s into %s", name, target)
				} else {
					require.EqualError(t, gotErr, wantErr.Error(), "%s into %s", name, target)
				}
				require.True(t, reflect.DeepEqual(want, got), "%s into %s = %#v, want %#v", name, target, got, want)
			}
		}
	}
}
