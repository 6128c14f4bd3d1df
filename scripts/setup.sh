#!/usr/bin/env bash
# What the tests need besides Go, set up idempotently (`make setup`, which
# `make test` runs; so does CI): sshd for the ssh tunnel, iproute2 for
# network namespaces, bubblewrap for the bwrap sandbox, Chromium for the
# viewer's browser tests, npm for the packaged harnesses, Python for the
# pull API's example, and a loopback PostgreSQL with a test user and
# database, whose URL it writes to .evalflow/test-postgres-url (unless
# EVALFLOW_TEST_POSTGRES names one already). The container engine is
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

need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ip >/dev/null || need+=(iproute2)
command -v bwrap >/dev/null || need+=(bubblewrap)
[ -x /usr/bin/chromium ] || need+=(chromium)
command -v npm >/dev/null || need+=(nodejs npm)
[ -n "${EVALFLOW_TEST_POSTGRES:-}" ] || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || need+=(postgresql)
command -v python3 >/dev/null || need+=(python3)
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

mkdir -p .evalflow
if [ -n "${EVALFLOW_TEST_POSTGRES:-}" ]; then
	printf '%s\n' "$EVALFLOW_TEST_POSTGRES" > .evalflow/test-postgres-url
	exit 0
fi
aspg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else sudo -u postgres "$@"; fi; }
pgver=$(ls /usr/lib/postgresql | sort -n | tail -1)
if ! pg_lsclusters -h 2>/dev/null | grep -q .; then
	$sudo pg_createcluster "$pgver" main >/dev/null
fi
if ! pg_lsclusters -h | awk '$4 == "online"' | grep -q .; then
	$sudo pg_ctlcluster "$pgver" main start
fi
pgport=$(pg_lsclusters -h | awk '$4 == "online" {print $3; exit}')
aspg psql -p "$pgport" -qtAc "SELECT 1 FROM pg_roles WHERE rolname = 'evalflow'" | grep -q 1 ||
	aspg psql -p "$pgport" -qc "CREATE ROLE evalflow LOGIN PASSWORD 'evalflow' CREATEDB CREATEROLE"
aspg psql -p "$pgport" -qtAc "SELECT 1 FROM pg_database WHERE datname = 'evalflow_test'" | grep -q 1 ||
	aspg psql -p "$pgport" -qc "CREATE DATABASE evalflow_test OWNER evalflow"
echo "postgres://evalflow:evalflow@127.0.0.1:$pgport/evalflow_test?sslmode=disable" > .evalflow/test-postgres-url
echo "setup: PostgreSQL $pgver on port $pgport"
