package main

import (
	"github.com/evalflow/evalflow/bench/internal/loadgen"
	"github.com/evalflow/evalflow/bench/internal/orchestration"
)

// Results is bench/results.json.
type Results struct {
	// source is the file the results were read from, when they were.
	source        string
	GeneratedAt   string             `json:"generated_at"`
	Machine       Machine            `json:"machine"`
	Latency       []LatencyRow       `json:"latency"`
	Peers         *Peers             `json:"peers,omitempty"`
	Throughput    []ThroughputRow    `json:"throughput"`
	Streaming     []StreamRow        `json:"streaming"`
	Capacity      *Capacity          `json:"capacity"`
	Orchestration []OrchestrationRow `json:"orchestration"`
	Scale         *Scale             `json:"scale"`
	GoBench       []GoBenchRow       `json:"go_bench"`
}

// LatencyRow is one target's non-streaming latency at one body size.
type LatencyRow struct {
	Size    string          `json:"size"`
	Target  string          `json:"target"`
	Dialect string          `json:"dialect"`
	Latency loadgen.Summary `json:"latency"`
	// Added is over the mock reached directly with the same dialect.
	Added loadgen.Added `json:"added"`
	// Turns counts the turns the interception server recorded, which must
	// equal the requests it served (warm-up included).
	Turns   int `json:"turns_recorded,omitempty"`
	Errored int `json:"turns_errored,omitempty"`
	// Failed counts calls that failed and were tried again (loadgen.Interleaved).
	Failed int `json:"failed_calls,omitempty"`
}

// ThroughputRow is one target at one number of clients.
type ThroughputRow struct {
	Target  string             `json:"target"`
	Clients int                `json:"clients"`
	Closed  loadgen.LoadResult `json:"closed_loop"`
	// Under5ms is the highest paced rate found whose p99 stayed under 5 ms.
	Under5ms loadgen.LoadResult `json:"max_rps_p99_under_5ms"`
}

// StreamRow is one target's streams of the streaming section.
type StreamRow struct {
	Target     string          `json:"target"`
	Dialect    string          `json:"dialect"`
	Streams    int             `json:"streams"`
	Events     int             `json:"events"`
	Lost       int             `json:"lost"`
	Merged     int             `json:"merged"`
	TTFT       loadgen.Summary `json:"ttft"`
	Delay      loadgen.Summary `json:"event_delay"`
	AddedTTFT  loadgen.Added   `json:"added_ttft"`
	AddedDelay loadgen.Added   `json:"added_event_delay"`
	// Gap is the time between two content events as the client read them.
	Gap loadgen.Summary `json:"event_gap"`
	// Versus names the relay arm a translated arm is compared with, on the
	// same upstream stream; the ratios are this arm's p99 over its.
	Versus     string  `json:"versus,omitempty"`
	TTFTRatio  float64 `json:"ttft_p99_ratio,omitempty"`
	DelayRatio float64 `json:"event_delay_p99_ratio,omitempty"`
	GapRatio   float64 `json:"event_gap_p99_ratio,omitempty"`
	// TTFTAlone is the TTFT of short streams (4 events, no gap) sent one
	// at a time, the compared arms taking turns: many samples, no load of
	// the section's own; the ratios are over the relay arm's.
	TTFTAlone         *loadgen.Summary `json:"ttft_alone,omitempty"`
	TTFTAloneRatioP50 float64          `json:"ttft_alone_p50_ratio,omitempty"`
	TTFTAloneRatioP99 float64          `json:"ttft_alone_p99_ratio,omitempty"`
}

// Capacity is the concurrent-streams section: the interception server in
// its own process.
type Capacity struct {
	Events   int             `json:"events_per_stream"`
	GapMS    int             `json:"gap_ms"`
	IdleRSS  int64           `json:"idle_rss_bytes"`
	Levels   []CapacityLevel `json:"levels"`
	MaxClean int             `json:"max_streams_no_loss"`
	Note     string          `json:"note,omitempty"`
}

// CapacityLevel is one number of concurrent streams.
type CapacityLevel struct {
	loadgen.StreamsResult
	// RSS is the interception process's resident set while every stream
	// was open; PeakRSS its high-water mark.
	RSS     int64 `json:"rss_bytes"`
	PeakRSS int64 `json:"peak_rss_bytes"`
}

// OrchestrationRow is one system's run of one size.
type OrchestrationRow = orchestration.Result

// Scale is the long eval: bounded histories and flat worker memory.
type Scale struct {
	Rollouts    int         `json:"rollouts"`
	Concurrency int         `json:"concurrency"`
	WallSeconds float64     `json:"wall_s"`
	Failed      int64       `json:"failed"`
	Runs        int         `json:"runs"`
	MaxHistory  int         `json:"max_history_events"`
	RSS         []RSSSample `json:"worker_rss"`
	RecordedAt  string      `json:"recorded_at"`
}

// RSSSample is the worker's resident set after Done rollouts.
type RSSSample struct {
	Done int64 `json:"done"`
	RSS  int64 `json:"rss_bytes"`
}

// GoBenchRow is one line of go test -bench -benchmem.
type GoBenchRow struct {
	Name        string  `json:"name"`
	NsPerOp     float64 `json:"ns_per_op"`
	BytesPerOp  float64 `json:"bytes_per_op"`
	AllocsPerOp float64 `json:"allocs_per_op"`
	// CPUNsPerOp is the process's CPU time per op, which other processes
	// taking the cores do not inflate as they do ns/op.
	CPUNsPerOp float64 `json:"cpu_ns_per_op"`
}
