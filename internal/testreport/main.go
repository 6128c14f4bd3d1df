// Command testreport reads `go test -json` on its standard input and
// writes what `go test` would have (a line per package, the output of
// every failed test and of every package that did not build), then where
// the time went: the slowest packages and the slowest tests. It exits 1
// when a package failed. `make test` pipes every package's run through it.
//
//	go test -json ./... | go run ./internal/testreport [-top N]
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	top := flag.Int("top", 15, "how many of the slowest packages and tests to list")
	flag.Parse()
	r := newReport(os.Stdout)
	if err := r.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	r.summary(*top)
	if r.failed {
		os.Exit(1)
	}
}
