#!/usr/bin/env bash
# test.sh: `make test`, every test, each stage's time printed. The race
# detector's build of every package (the processors' work: the embedded
# Temporal server is most of it) compiles while the container engine, the
# packages and PostgreSQL install (the network's and the disk's); then
# every package but the fault suite runs with -race, its slowest packages
# and tests listed after (internal/testreport), then the fault suite on
# its own: it loads both cores on purpose, and a test beside it would be
# starved.
#
# Everything but the race detector's build is built with CGO_ENABLED=0, as
# `make run` builds the binaries: the tests' own builds (the Temporal
# server's processes, the starter, the worker, the agent) are then the
# build cache's, not a second compile of the server.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
export CGO_ENABLED=0

stage() {
	local name=$1 start=$SECONDS
	shift
	echo "== stage: $name"
	"$@"
	echo "== stage: $name: $((SECONDS - start)) s"
}

# The race detector needs cgo, so a C compiler, before anything compiles.
stage "a C compiler for the race detector" bash scripts/setup.sh --compiler

# The race detector's flags, the same for its build and the test run so
# the run links what the build compiled. modernc.org's SQLite (the embedded
# Temporal server's store) is C translated to Go: its pointer arithmetic is
# the C library's, and the checks -race adds to every unsafe conversion
# (checkptr) cost a third of an in-process server's CPU there. They stay on
# for every other package, and the race detector for all. Test binaries are
# linked without DWARF (-w): they are run, never debugged, here.
race=(-race "-gcflags=modernc.org/...=-d=checkptr=0")
# The slowest packages first (internal/testreport lists them after each
# run): go test starts packages in the order given, two at a time on two
# cores, and a long one started last would run alone at the end.
module=$($GO list -m)
slow=(e2e starter internal/harness/container pull/pullhttp activities internal/temporalcluster internal/wiring internal/harness/packaged)
first=$(printf "$module/%s\n" "${slow[@]}")
pkgs="$first
$($GO list ./... | grep -v '/faults$' | grep -vxF "$first")"
built=$($GO list -f '{{if .GoFiles}}{{.ImportPath}}{{end}}' ./...)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$SECONDS
echo "== stage: the race detector's build of every package, in the background"
# Its errors are the test run's to report: here they are only kept.
CGO_ENABLED=1 $GO build "${race[@]}" $built >"$log" 2>&1 &
build=$!

stage "the container engine" bash scripts/engine.sh
stage "packages and PostgreSQL" bash scripts/setup.sh
stage "the Temporal server's binaries" make --no-print-directory temporal-server
wait "$build" || true
echo "== stage: the race detector's build: $((SECONDS - start)) s from its start"

# Test binaries run under `env CGO_ENABLED=0` so that what they build is
# built as above.
stage "every package but the fault suite, with -race" bash -o pipefail -c '
	GO=$0 pkgs=$1
	shift
	CGO_ENABLED=1 "$GO" test "$@" -ldflags=-w -count=1 -json -timeout 30m -exec "env CGO_ENABLED=0" $pkgs |
		"$GO" run ./internal/testreport' "$GO" "$pkgs" "${race[@]}"
stage "the fault suite" $GO test -count=1 -v -timeout 30m ./faults/
