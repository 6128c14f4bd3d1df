package tasksets

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpen(t *testing.T) {
	path := writeFile(t, "mine.jsonl", `{"id":"a","prompt":"p"}`)
	harborDir := t.TempDir()
	files := harborTask("x")
	for k, v := range harborTask("y") {
		files[k] = v
	}
	writeTree(t, harborDir, files)
	tests := []struct {
		ref     string
		wantLen int64
		want    Taskset
	}{
		{"arithmetic", Infinite, Arithmetic{}},
		{"arithmetic?seed=7", Infinite, Arithmetic{Seed: 7}},
		{"arithmetic?seed=7&size=50", 50, Arithmetic{Seed: 7, Size: 50}},
		{"sample", 256, nil},
		{path, 1, nil},
		{harborDir, 2, nil},
		{"harbor:" + harborDir, 2, nil},
		{HarborSampleName, -2, nil}, // -2: at least 8
	}
	for _, tt := range tests {
		ts, err := Open(tt.ref)
		require.NoError(t, err, "Open(%q)", tt.ref)
		if tt.wantLen == -2 {
			assert.GreaterOrEqual(t, ts.Len(), int64(8), "Open(%q).Len()", tt.ref)
		} else {
			assert.Equal(t, tt.wantLen, ts.Len(), "Open(%q).Len()", tt.ref)
		}
		if tt.want != nil {
			assert.Equal(t, tt.want, ts, "Open(%q)", tt.ref)
		}
		_, err = ts.Task(context.Background(), 0)
		assert.NoError(t, err, "Open(%q).Task(0)", tt.ref)
		if c, ok := ts.(io.Closer); ok {
			assert.NoError(t, c.Close())
		}
	}
}

func TestOpenErrors(t *testing.T) {
	tests := []struct {
		ref  string
		want string
	}{
		{"gsm8k", `unknown taskset "gsm8k" (want sample, arithmetic`},
		{"", `unknown taskset ""`},
		{"sample?seed=1", "takes no parameters"},
		{"arithmetic?seed=x", `seed "x"`},
		{"arithmetic?size=0", `size "0"`},
		{"arithmetic?size=-3", `size "-3"`},
		{"arithmetic?colour=red", `unknown parameter "colour"`},
		{"missing.jsonl", "missing.jsonl"},
		{"/dev/null", "/dev/null is a character device: not a regular file"},
		{"harbor:/nonexistent-evalflow-dir", "no such file or directory"},
		{"harbor-sample?x=1", "takes no parameters"},
	}
	for _, tt := range tests {
		_, err := Open(tt.ref)
		require.Error(t, err, "Open(%q)", tt.ref)
		assert.Contains(t, err.Error(), tt.want, "Open(%q)", tt.ref)
	}
}
