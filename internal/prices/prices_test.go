package prices_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/internal/prices"
)

func write(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	return path
}

func TestDefaultPricesTheMockAndKnownModels(t *testing.T) {
	d := prices.Default()
	for _, m := range []string{"mock", "gpt-5", "gpt-4o-mini", "claude-sonnet-4-5"} {
		p, ok := d.Lookup(m)
		require.True(t, ok, "Lookup(%q)", m)
		assert.Positive(t, p.Input, "%s input", m)
		assert.Positive(t, p.Output, "%s output", m)
	}
}

func TestLoadMergesAFileOverTheDefault(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"prices.yaml", "mock:\n  input: 10\n  output: 20\nmy-model:\n  input: 1\n  cached_input: 0.1\n  cache_write: 2\n  output: 3\n"},
		{"prices.json", `{"mock": {"input": 10, "output": 20}, "My-Model": {"input": 1, "cached_input": 0.1, "cache_write": 2, "output": 3}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table, err := prices.Load(write(t, tc.name, tc.body))
			require.NoError(t, err)
			mock, ok := table.Lookup("mock")
			require.True(t, ok)
			assert.Equal(t, 10.0, mock.Input, "the file's price replaces the default")
			assert.Nil(t, mock.CachedInput, "a model the file names takes the file's price whole")
			own, ok := table.Lookup("my-model")
			require.True(t, ok, "a model only the file names")
			require.NotNil(t, own.CacheWrite)
			assert.Equal(t, 2.0, *own.CacheWrite)
			_, ok = table.Lookup("gpt-5")
			assert.True(t, ok, "the default's other models stay")
		})
	}
}

func TestLoadErrorsNameTheProblem(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"mock: [1, 2]", `model "mock": want a map`},
		{"mock:\n  input: 1\n  outptu: 2\n", `unknown field "outptu"`},
		{"mock:\n  input: -1\n  output: 2\n", "input -1: a price is a finite number"},
		{"mock:\n  input: cheap\n", "want numbers in USD per million tokens"},
		{"- mock\n", "not a map of model names to prices"},
	} {
		_, err := prices.Load(write(t, "prices.yaml", tc.body))
		require.Error(t, err, "Load(%q)", tc.body)
		assert.ErrorContains(t, err, tc.want, "Load(%q)", tc.body)
		assert.ErrorContains(t, err, "--prices prices.yaml")
	}
	_, err := prices.Load(filepath.Join(t.TempDir(), "missing.yaml"))
	assert.ErrorContains(t, err, "--prices")
}

func TestLookupMatchesSnapshotsAndProviderPrefixes(t *testing.T) {
	table := prices.Table{"claude-sonnet-4": {Input: 1}, "claude-sonnet-4-5": {Input: 2}, "gpt-5": {Input: 3}}
	for _, tc := range []struct {
		model string
		want  float64
		ok    bool
	}{
		{"claude-sonnet-4-5-20250929", 2, true},
		{"claude-sonnet-4-20250514", 1, true},
		{"openai/gpt-5", 3, true},
		{"GPT-5", 3, true},
		{"gpt-5o", 0, false},
		{"unknown", 0, false},
	} {
		p, ok := table.Lookup(tc.model)
		assert.Equal(t, tc.ok, ok, "Lookup(%q)", tc.model)
		assert.Equal(t, tc.want, p.Input, "Lookup(%q)", tc.model)
	}
}

func TestCostPricesEachKindOfToken(t *testing.T) {
	cached, write := 0.5, 2.0
	p := prices.Price{Input: 1, CachedInput: &cached, CacheWrite: &write, Output: 4}
	// 1000 input tokens of which 200 read from the cache and 100 written.
	u := dialects.Usage{InputTokens: 1000, CacheReadTokens: 200, CacheWriteTokens: 100, OutputTokens: 50}
	assert.InDelta(t, (700*1+200*0.5+100*2+50*4)/1e6, p.Cost(u), 1e-15)
	plain := prices.Price{Input: 1, Output: 4}
	assert.InDelta(t, (1000*1+50*4)/1e6, plain.Cost(u), 1e-15, "no cache prices: cached tokens pay the input price")

	table := prices.Table{"mock": p}
	usd, ok := table.Cost(u, "", "unknown-model", "mock")
	assert.True(t, ok)
	assert.InDelta(t, p.Cost(u), usd, 1e-15)
	_, ok = table.Cost(u, "unknown-model")
	assert.False(t, ok, "an unknown model's cost is unknown, not 0")
}
