package wiring

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseProvider(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Provider
	}{
		{"backup=https://api.example.com/v1", Provider{Name: "backup", Dialect: "chat", URL: "https://api.example.com/v1"}},
		{"claude=anthropic:https://api.anthropic.com/v1", Provider{Name: "claude", Dialect: "anthropic", URL: "https://api.anthropic.com/v1"}},
		{"oai=responses:http://127.0.0.1:8000/v1", Provider{Name: "oai", Dialect: "responses", URL: "http://127.0.0.1:8000/v1"}},
	} {
		got, err := ParseProvider(tt.in)
		require.NoError(t, err, "ParseProvider(%q)", tt.in)
		assert.Equal(t, tt.want, got, "ParseProvider(%q)", tt.in)
	}
	for _, tt := range []struct{ in, want string }{
		{"https://api.example.com/v1", "want NAME=URL or NAME=DIALECT:URL"},
		{"default=https://x/v1", `"default" is the worker's own provider (--base-url)`},
		{"a=gemini:https://x/v1", "the URL must start with http:// or https://"},
		{"a b=https://x/v1", "letters, digits, '-' and '_' only"},
	} {
		_, err := ParseProvider(tt.in)
		require.Error(t, err, "ParseProvider(%q)", tt.in)
		assert.Contains(t, err.Error(), tt.want, "ParseProvider(%q)", tt.in)
	}
}

// --provider is repeatable; the key is never a flag value, so the
// configuration holds names and URLs only.
func TestProviderFlags(t *testing.T) {
	cfg, err := parseWorker(t, "--provider", "claude=anthropic:https://api.anthropic.com/v1", "--provider", "backup=http://10.0.0.2:8000/v1")
	require.NoError(t, err)
	assert.Equal(t, []Provider{
		{Name: "claude", Dialect: "anthropic", URL: "https://api.anthropic.com/v1"},
		{Name: "backup", Dialect: "chat", URL: "http://10.0.0.2:8000/v1"},
	}, cfg.Providers)

	_, err = parseWorker(t, "--provider", "a=http://x/v1", "--provider", "a=http://y/v1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--provider a: the name is given twice")
}

// --claude-model says which Claude model a provider's name stands for; a
// value that names none is refused.
func TestClaudeModelFlags(t *testing.T) {
	cfg, err := parseWorker(t, "--claude-model", "sonnet=claude-sonnet-4-6", "--claude-model", "big=anthropic.claude-opus-4-1-v1")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"sonnet": "claude-sonnet-4-6", "big": "anthropic.claude-opus-4-1-v1"}, cfg.ClaudeModels)
	for _, tt := range []struct{ in, want string }{
		{"sonnet", "want NAME=CLAUDE"},
		{"sonnet=gpt-5", "gpt-5 is not a Claude model's name"},
	} {
		_, err := parseWorker(t, "--claude-model", tt.in)
		require.Error(t, err, "--claude-model %s", tt.in)
		assert.Contains(t, err.Error(), tt.want, "--claude-model %s", tt.in)
	}
	_, err = parseWorker(t, "--claude-model", "a=claude-opus-4-6", "--claude-model", "a=claude-opus-4-7")
	assert.ErrorContains(t, err, "the name is given twice")
}
