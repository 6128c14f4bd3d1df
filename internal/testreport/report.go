package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// event is a line of `go test -json` (cmd/test2json's TestEvent), build
// events included.
type event struct {
	Action     string
	Package    string
	Test       string
	Elapsed    float64
	Output     string
	ImportPath string
}

// timing is a package's or a test's run time.
type timing struct {
	name    string
	seconds float64
}

// report follows a `go test -json` stream: output is kept per test (and per
// package) until its end says whether to show it.
type report struct {
	w        io.Writer
	output   map[string][]string // by package + "\x00" + test
	packages []timing
	tests    []timing
	failed   bool
	start    time.Time
}

func newReport(w io.Writer) *report {
	return &report{w: w, output: map[string][]string{}, start: time.Now()}
}

func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not an event (a build error printed by go itself): as it is.
			fmt.Fprintln(r.w, string(line))
			continue
		}
		r.take(e)
	}
	return sc.Err()
}

func (r *report) take(e event) {
	pkg := e.Package
	if pkg == "" {
		pkg = e.ImportPath
	}
	key := pkg + "\x00" + e.Test
	switch e.Action {
	case "output", "build-output":
		r.output[key] = append(r.output[key], e.Output)
	case "build-fail":
		r.failed = true
		r.flush(key)
	case "pass", "skip":
		if e.Test == "" {
			r.packages = append(r.packages, timing{pkg, e.Elapsed})
			fmt.Fprintf(r.w, "ok  \t%s\t%.1fs\n", pkg, e.Elapsed)
		} else if e.Action == "pass" {
			r.test(pkg, e)
		}
		delete(r.output, key)
	case "fail":
		r.failed = true
		if e.Test == "" {
			r.packages = append(r.packages, timing{pkg, e.Elapsed})
			r.flush(key)
			fmt.Fprintf(r.w, "FAIL\t%s\t%.1fs\n", pkg, e.Elapsed)
			return
		}
		r.test(pkg, e)
		r.flush(key)
	}
}

// test records a top-level test's time (a subtest's is its parent's).
func (r *report) test(pkg string, e event) {
	if !strings.Contains(e.Test, "/") {
		r.tests = append(r.tests, timing{pkg + " " + e.Test, e.Elapsed})
	}
}

// flush writes and drops what key printed.
func (r *report) flush(key string) {
	for _, l := range r.output[key] {
		io.WriteString(r.w, l)
	}
	delete(r.output, key)
}

// summary lists the slowest packages and top-level tests.
func (r *report) summary(top int) {
	fmt.Fprintf(r.w, "\ntestreport: %d packages in %s of wall time\n", len(r.packages), time.Since(r.start).Round(time.Second))
	r.slowest("packages", r.packages, top)
	r.slowest("tests", r.tests, top)
}

func (r *report) slowest(what string, ts []timing, top int) {
	ts = slices.Clone(ts)
	slices.SortStableFunc(ts, func(a, b timing) int {
		switch {
		case a.seconds > b.seconds:
			return -1
		case a.seconds < b.seconds:
			return 1
		}
		return 0
	})
	fmt.Fprintf(r.w, "testreport: the %d slowest %s\n", min(top, len(ts)), what)
	for _, t := range ts[:min(top, len(ts))] {
		fmt.Fprintf(r.w, "  %8.1fs  %s\n", t.seconds, t.name)
	}
}
