package tasksets

import (
	"bytes"
	_ "embed"
)

// sampleData is the bundled sample: arithmetic word problems, each ending in
// an expression arith.Find extracts, so the offline mock model can solve it.
// Regenerate with: go test ./tasksets -run TestSample -update
//
//go:embed data/sample.jsonl
var sampleData []byte

// Sample opens the bundled sample taskset.
func Sample() (*JSONL, error) {
	return NewJSONL("sample", bytes.NewReader(sampleData), int64(len(sampleData)))
}
