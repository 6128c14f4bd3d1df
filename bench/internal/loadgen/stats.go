package loadgen

import (
	"math"
	"slices"
	"time"
)

// Summary is a latency distribution, in microseconds.
type Summary struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_us"`
	P90  float64 `json:"p90_us"`
	P99  float64 `json:"p99_us"`
	Max  float64 `json:"max_us"`
	Mean float64 `json:"mean_us"`
}

// Summarize computes the distribution of ds (nearest-rank percentiles).
func Summarize(ds []time.Duration) Summary {
	if len(ds) == 0 {
		return Summary{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Summary{
		N: len(s), P50: us(Percentile(s, 50)), P90: us(Percentile(s, 90)), P99: us(Percentile(s, 99)),
		Max: us(s[len(s)-1]), Mean: us(sum / time.Duration(len(s))),
	}
}

// Percentile is the nearest-rank p-th percentile of sorted.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func us(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)*10) / 10 }

// Added is the latency a proxy adds over a baseline at p50 and p99.
type Added struct {
	P50 float64 `json:"p50_us"`
	P99 float64 `json:"p99_us"`
}

// AddedOver is s minus base at p50 and p99.
func (s Summary) AddedOver(base Summary) Added {
	return Added{P50: round1(s.P50 - base.P50), P99: round1(s.P99 - base.P99)}
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }
