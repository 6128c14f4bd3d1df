package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/bench/loadgen"
)

func TestReadGoBench(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gobench.txt")
	require.NoError(t, os.WriteFile(path, []byte(`goos: linux
BenchmarkRelay/chat/4KB/json-2   	    3000	    212355 ns/op	  19.01 MB/s	   60146 B/op	     112 allocs/op
PASS
`), 0o644))
	rows, err := readGoBench(path)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Equal(t, GoBenchRow{Name: "Relay/chat/4KB/json-2", NsPerOp: 212355, BytesPerOp: 60146, AllocsPerOp: 112}, rows[0])
}

func TestWriteMarkdownKeepsProse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "B.md")
	require.NoError(t, os.WriteFile(path, []byte("# Title\n\nprose\n\n"+beginMarker+"\nold\n"+endMarker+"\n\nafter\n"), 0o644))
	r := &Results{Latency: []LatencyRow{
		{Size: "4KB", Target: tDirect, Latency: loadgen.Summary{P50: 100, P99: 200}},
		{Size: "4KB", Target: tRelay, Latency: loadgen.Summary{P50: 140, P99: 500}, Added: loadgen.Added{P50: 40, P99: 300}},
	}}
	require.NoError(t, writeMarkdown(path, r, nil))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	s := string(b)
	assert.True(t, strings.HasPrefix(s, "# Title\n\nprose\n\n"+beginMarker), s)
	assert.True(t, strings.HasSuffix(s, endMarker+"\n\nafter\n"), s)
	assert.NotContains(t, s, "\nold\n")
	assert.Contains(t, s, "| 4KB | relay | ")
}

func TestVerdict(t *testing.T) {
	tests := []struct {
		got, limit float64
		want       string
	}{
		{40, 50, "met: 40.0 µs"},
		{60, 50, "**missed**: 60.0 µs, 10.0 µs over"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, verdict(tt.got, tt.limit, "µs"), "verdict(%v, %v)", tt.got, tt.limit)
	}
}
