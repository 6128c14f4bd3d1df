#!/usr/bin/env bash
# build.sh OUT PACKAGE [go build flags…]: builds PACKAGE into OUT, saying
# what happens while it happens. On a fresh machine that is minutes of work
# with nothing else to show for it: the modules are downloaded, then about
# 2,100 packages compiled (the embedded Temporal server is most of them).
# A build with nothing to do says nothing.
set -euo pipefail
out=$1 pkg=$2
shift 2
GO=${GO:-go}

# Every line goes to stderr: stdout stays the program's.
say() { printf '%s\n' "$*" >&2; }
# On a terminal a counter redraws one line; in a log it prints every tenth.
if [ -t 2 ]; then tty=1; else tty=0; fi

# The packages to compile, listed without touching the network: a list that
# fails is one whose modules are not downloaded yet.
list() { $GO list -deps -f '{{if .Stale}}{{.ImportPath}}{{end}}' "$pkg"; }
if ! stale=$(GOPROXY=off list 2>/dev/null); then
	say "build: downloading the Go modules $pkg needs (first build only)…"
	start=$SECONDS
	$GO mod download -x 2>&1 | awk -v tty="$tty" '
		/^# get .*: 200 OK/ { n++; if (tty) printf "\rbuild: %d files fetched", n > "/dev/stderr"; else if (n % 100 == 0) print "build: " n " files fetched" > "/dev/stderr" }
		/^go: / { print > "/dev/stderr" }
		END { if (tty && n) print "" > "/dev/stderr" }'
	say "build: modules downloaded in $((SECONDS - start)) s"
	stale=$(list)
fi
stale=$(printf '%s' "$stale" | grep -c . || true)
if [ "$stale" -gt 200 ]; then
	say "build: compiling $stale packages for $out (a first build; later ones take seconds)…"
fi
# The version --version prints: git describe of the source when it is a
# checkout, else $EVALFLOW_VERSION (a release tarball's), stamped at link
# time. A build without either falls back to the module and VCS
# information, then to the binary's build id (internal/wiring/version.go).
version=${EVALFLOW_VERSION:-$(git describe --tags --always --dirty 2>/dev/null || true)}
stampflags=()
if [ -n "$version" ]; then
	stampflags=(-ldflags "-X github.com/evalflow/evalflow/internal/wiring.stamp=$version")
fi
start=$SECONDS
# -v names each package as it is compiled; anything else is the compiler's.
# A -ldflags of the caller's comes after the stamp's and replaces it.
$GO build -v -o "$out" "${stampflags[@]}" "$@" "$pkg" 2>&1 | awk -v total="$stale" -v tty="$tty" -v quiet="$((stale <= 200))" '
	/^[a-zA-Z0-9_.-]+(\/[a-zA-Z0-9_.~+-]+)*$/ && !/\.go:/ {
		n++
		if (quiet) next
		if (tty) printf "\rbuild: %d/%d packages", n, total > "/dev/stderr"
		else if (n % int(total / 10 + 1) == 0) print "build: " n "/" total " packages" > "/dev/stderr"
		next
	}
	{ if (tty && n && !quiet) print "" > "/dev/stderr"; print > "/dev/stderr" }
	END { if (tty && n && !quiet) print "" > "/dev/stderr" }'
if [ "$stale" -gt 200 ]; then
	say "build: $out built in $((SECONDS - start)) s"
fi
