// Command bench runs evalflow's benchmarks, each figure against its
// baselines in the same run, interleaved, on loopback only. It writes the
// machine-readable results (bench/results.json) and regenerates the results
// section of BENCHMARKS.md.
//
//	go run ./bench/cmd/bench                      # everything but scale (make bench)
//	go run ./bench/cmd/bench -only latency        # one section; the others are kept from the last run
//	go run ./bench/cmd/bench -only scale          # the 20,000-rollout eval (make bench-scale)
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

// sections are the benchmark sections in the order they run; scale only
// runs when asked.
var sections = []string{"latency", "peers", "throughput", "streaming", "capacity", "orchestration"}

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "serve": // the interception worker of the capacity section
			os.Exit(serveMain(os.Args[2:]))
		case "worker": // the worker of the scale section
			os.Exit(workerMain(os.Args[2:]))
		}
	}
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	only    []string
	quick   bool
	out     string
	md      string
	gobench string
	before  string
}

func run(args []string, log io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var o options
	only := fs.String("only", "", "comma-separated sections to run: "+strings.Join(sections, ",")+",scale; render runs none (default: all but scale)")
	fs.BoolVar(&o.quick, "quick", false, "fewer samples and levels: a smoke run, not for publishing")
	fs.StringVar(&o.out, "out", "bench/results.json", "results file; sections not run are kept from it")
	fs.StringVar(&o.md, "md", "BENCHMARKS.md", "markdown file whose results section is regenerated; empty: none")
	fs.StringVar(&o.gobench, "gobench", "", "output of go test -bench -benchmem to include")
	fs.StringVar(&o.before, "before", "",
		"comma-separated results files of earlier runs, oldest first, to compare with this one in the markdown (none by default); missing files are left out")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.only = sections
	if *only != "" {
		o.only = strings.Split(*only, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	res := &Results{}
	if b, err := os.ReadFile(o.out); err == nil {
		_ = json.Unmarshal(b, res) // a stale or broken file is simply replaced
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	render := slices.Equal(o.only, []string{"render"})
	if !render {
		res.Machine = machine()
		res.Machine.LoadBefore = loadavg()
	}
	logf := func(format string, a ...any) { fmt.Fprintf(log, time.Now().Format("15:04:05 ")+format+"\n", a...) }
	for _, s := range o.only {
		start := time.Now()
		logf("%s …", s)
		var err error
		switch s {
		case "latency":
			res.Latency, err = latencySection(ctx, o, logf)
		case "peers":
			res.Peers, err = peersSection(ctx, o, logf)
		case "throughput":
			res.Throughput, err = throughputSection(ctx, o, logf)
		case "streaming":
			res.Streaming, err = streamingSection(ctx, o, logf)
		case "capacity":
			res.Capacity, err = capacitySection(ctx, o, logf)
		case "orchestration":
			res.Orchestration, err = orchestrationSection(ctx, o, logf)
		case "scale":
			res.Scale, err = scaleSection(ctx, o, logf)
		case "render": // nothing to run: rewrite the markdown from the results file
		default:
			return fmt.Errorf("unknown section %q (want %s or scale)", s, strings.Join(sections, ", "))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		logf("%s done in %s", s, time.Since(start).Round(time.Millisecond))
	}
	if o.gobench != "" {
		gb, err := readGoBench(o.gobench)
		if err != nil {
			return err
		}
		res.GoBench = gb
	}
	if slices.Contains(o.only, "latency") || slices.Contains(o.only, "orchestration") {
		res.GeneratedAt = time.Now().UTC().Format(time.RFC3339)
	}
	if !render {
		res.Machine.LoadAfter = loadavg()
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(o.out, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if o.md != "" {
		var before []*Results
		for _, name := range strings.Split(o.before, ",") {
			b, err := os.ReadFile(name)
			if err != nil {
				continue
			}
			r := &Results{}
			if err := json.Unmarshal(b, r); err != nil {
				return fmt.Errorf("read %s: %w", name, err)
			}
			r.source = name
			before = append(before, r)
		}
		if err := writeMarkdown(o.md, res, before); err != nil {
			return err
		}
	}
	logf("wrote %s%s", o.out, map[bool]string{true: " and " + o.md, false: ""}[o.md != ""])
	return nil
}

// Machine is where the numbers were taken.
type Machine struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPU        string `json:"cpu"`
	Go         string `json:"go"`
	OS         string `json:"os"`
	// LoadBefore and LoadAfter are /proc/loadavg's 1, 5 and 15 minute
	// averages when the run began and ended: other work on the cores.
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}
