package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/bench/internal/loadgen"
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

// The targets table reads its figures from the run, shows the spread of
// the rounds, and gives what bounds a figure only when it misses.
func TestGoalsMarkdown(t *testing.T) {
	r := &Results{
		Peers: &Peers{Rows: []PeerRow{
			{Size: "4KB", Target: tProxy, AddedCPU: 100, Closed: loadgen.LoadResult{RPS: 1000}, RoundRPS: []float64{1000, 1000}},
			{Size: "4KB", Target: tRelay, AddedCPU: 110, Closed: loadgen.LoadResult{RPS: 950}, RoundRPS: []float64{900, 1000}},
			{Size: "64KB", Target: tProxy, AddedCPU: 100, Added: loadgen.Added{P50: 100}},
			{Size: "64KB", Target: tRelay, AddedCPU: 150, Added: loadgen.Added{P50: 105}},
		}},
		Orchestration: []OrchestrationRow{{System: "temporal", Rollouts: 1000, WallSeconds: 30}, {System: "errgroup", Rollouts: 1000, WallSeconds: 10}},
	}
	md := goalsMarkdown(r)
	line := func(prefix string) string {
		for l := range strings.SplitSeq(md, "\n") {
			if strings.HasPrefix(l, "| "+prefix) {
				return l
			}
		}
		t.Fatalf("no row %q in\n%s", prefix, md)
		return ""
	}
	assert.Contains(t, line("relay 4 KB: added CPU"), "| 1.10× (110 vs 100 µs) | ≤ 1.2× | met |  |")
	assert.Contains(t, line("relay 4 KB: req/s"), "95% (rounds 90–100%)")
	assert.Contains(t, line("relay 64 KB: added CPU"), "| 1.50× (150 vs 100 µs) | ≤ 1.2× | **missed** | The relay is store-and-forward")
	assert.Contains(t, line("relay 64 KB: added p50"), "| met |")
	assert.Contains(t, line("orchestration, 1,000"), "| 3.00× (30.00 vs 10.00 s) | ≤ 2× | **missed** | two activities")
	assert.Contains(t, line("orchestration, 128"), "not measured in this run")
}

// TestBenchmarksKeepsItsMarkers: the repository's BENCHMARKS.md holds the
// generated part between one begin and one end marker, so that make bench
// rewrites that part and keeps the prose around it.
func TestBenchmarksKeepsItsMarkers(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "BENCHMARKS.md"))
	require.NoError(t, err)
	s := string(b)
	require.Equal(t, 1, strings.Count(s, beginMarker), "begin markers")
	require.Equal(t, 1, strings.Count(s, endMarker), "end markers")
	assert.Less(t, strings.Index(s, beginMarker), strings.Index(s, endMarker))
}
