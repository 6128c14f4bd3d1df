// Package prices is what model calls cost: a table of USD per million
// tokens per model (a bundled default, and a file of the operator's merged
// over it), and the cost of one call's usage as its provider reported it.
package prices

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/evalflow/evalflow/dialects"
	"go.yaml.in/yaml/v3"
)

// Price is a model's price in USD per million tokens. A nil cache price
// is the Input price.
type Price struct {
	// Input is the price of input tokens neither read from nor written to
	// the provider's prompt cache.
	Input float64 `json:"input" yaml:"input"`
	// CachedInput is the price of input tokens read from the cache.
	CachedInput *float64 `json:"cached_input,omitempty" yaml:"cached_input,omitempty"`
	// CacheWrite is the price of input tokens written to the cache.
	CacheWrite *float64 `json:"cache_write,omitempty" yaml:"cache_write,omitempty"`
	// Output is the price of output tokens, reasoning included.
	Output float64 `json:"output" yaml:"output"`
}

// Table is prices by model name.
type Table map[string]Price

//go:embed default.yaml
var defaultFile []byte

// Default is the bundled table: well-known models at their published list
// prices, and the offline mock at made-up ones.
func Default() Table {
	t, err := parse(defaultFile)
	if err != nil {
		panic("prices: the bundled table does not parse: " + err.Error())
	}
	return t
}

// Load returns the default table with the file at path merged over it: a
// model the file names takes the file's price whole. The file is YAML or
// JSON (JSON is YAML), a map of model names to prices.
func Load(path string) (Table, error) {
	t := Default()
	if path == "" {
		return t, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--prices: %w", err)
	}
	own, err := parse(b)
	if err != nil {
		return nil, fmt.Errorf("--prices %s: %w", filepath.Base(path), err)
	}
	for m, p := range own {
		t[m] = p
	}
	return t, nil
}

func parse(b []byte) (Table, error) {
	var raw map[string]yaml.Node
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("not a map of model names to prices (e.g. `gpt-5: {input: 1.25, output: 10}`): %w", err)
	}
	t := make(Table, len(raw))
	for model, n := range raw {
		var p Price
		dec := n
		if err := decodeStrict(&dec, &p); err != nil {
			return nil, fmt.Errorf("model %q: %w", model, err)
		}
		if err := p.check(); err != nil {
			return nil, fmt.Errorf("model %q: %w", model, err)
		}
		t[strings.ToLower(model)] = p
	}
	return t, nil
}

// decodeStrict decodes n into p, refusing fields a Price does not have.
func decodeStrict(n *yaml.Node, p *Price) error {
	if n.Kind != yaml.MappingNode {
		return errors.New("want a map with input, cached_input, cache_write and output in USD per million tokens")
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch k := n.Content[i].Value; k {
		case "input", "cached_input", "cache_write", "output":
		default:
			return fmt.Errorf("unknown field %q: the fields are input, cached_input, cache_write and output", k)
		}
	}
	if err := n.Decode(p); err != nil {
		return fmt.Errorf("want numbers in USD per million tokens: %w", err)
	}
	return nil
}

func (p Price) check() error {
	for _, f := range []struct {
		name string
		v    *float64
	}{{"input", &p.Input}, {"cached_input", p.CachedInput}, {"cache_write", p.CacheWrite}, {"output", &p.Output}} {
		if f.v != nil && (*f.v < 0 || math.IsNaN(*f.v) || math.IsInf(*f.v, 0)) {
			return fmt.Errorf("%s %v: a price is a finite number of USD per million tokens, 0 or more", f.name, *f.v)
		}
	}
	return nil
}

// Lookup finds model's price: its exact name (case aside), else the
// longest name in the table it extends with "-" (a dated snapshot such as
// claude-sonnet-4-5-20250929 pays claude-sonnet-4-5's price), else the same
// for the name after a provider prefix ("openai/gpt-5").
func (t Table) Lookup(model string) (Price, bool) {
	model = strings.ToLower(model)
	if p, ok := t.lookup(model); ok {
		return p, true
	}
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		return t.lookup(model[i+1:])
	}
	return Price{}, false
}

func (t Table) lookup(model string) (Price, bool) {
	if p, ok := t[model]; ok {
		return p, true
	}
	best := ""
	for name := range t {
		if len(name) > len(best) && strings.HasPrefix(model, name+"-") {
			best = name
		}
	}
	if best == "" {
		return Price{}, false
	}
	return t[best], true
}

// Cost is what a call's usage costs in USD at the price of the first of
// models the table knows (the model that answered, then the one asked
// for), or false when it knows none of them. dialects.Usage counts cached
// input in InputTokens, as the providers' usage does.
func (t Table) Cost(u dialects.Usage, models ...string) (float64, bool) {
	for _, m := range models {
		if m == "" {
			continue
		}
		if p, ok := t.Lookup(m); ok {
			return p.Cost(u), true
		}
	}
	return 0, false
}

// Cost is what usage u costs at price p, in USD.
func (p Price) Cost(u dialects.Usage) float64 {
	cached, write := p.Input, p.Input
	if p.CachedInput != nil {
		cached = *p.CachedInput
	}
	if p.CacheWrite != nil {
		write = *p.CacheWrite
	}
	plain := max(u.InputTokens-u.CacheReadTokens-u.CacheWriteTokens, 0)
	return (float64(plain)*p.Input + float64(u.CacheReadTokens)*cached +
		float64(u.CacheWriteTokens)*write + float64(u.OutputTokens)*p.Output) / 1e6
}
