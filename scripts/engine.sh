#!/usr/bin/env bash
# A container engine for the container runtime and its tests: Podman from
# Debian, serving the Docker Engine API on $DOCKER_HOST's socket
# (unix:///run/podman/podman.sock), with a Debian base image built from
# Debian's packages (no registry is needed). Idempotent: each step is
# skipped when done; a socket left by a killed service is replaced.
# Run as root (or with sudo); `make engine` runs it.
set -euo pipefail

sock="${DOCKER_HOST:-unix:///run/podman/podman.sock}"
sock="${sock#unix://}"
cache="${EVALFLOW_ENGINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/evalflow/engine}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null || ! sudo -n true 2>/dev/null; then
		echo "engine: Podman is installed and served as root here; run: sudo make engine" >&2
		exit 1
	fi
	sudo="sudo"
fi

need=()
command -v podman >/dev/null || need+=(podman)
command -v runc >/dev/null || need+=(runc)
command -v iptables >/dev/null || need+=(iptables)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v newuidmap >/dev/null || need+=(uidmap)
[ -x /usr/lib/podman/netavark ] || command -v netavark >/dev/null || need+=(netavark)
[ -x /usr/lib/podman/aardvark-dns ] || command -v aardvark-dns >/dev/null || need+=(aardvark-dns)
command -v catatonit >/dev/null || [ -x /usr/libexec/podman/catatonit ] || need+=(catatonit)
# The network of the sandboxes that may reach the internet, and the
# firewall the worker writes into each.
command -v slirp4netns >/dev/null || need+=(slirp4netns)
command -v nsenter >/dev/null || need+=(util-linux)
command -v curl >/dev/null || need+=(curl)
if [ "${#need[@]}" -gt 0 ]; then
	if ! command -v apt-get >/dev/null; then
		echo "engine: the container engine needs ${need[*]}; install them (Debian: apt-get install -y ${need[*]})" >&2
		exit 1
	fi
	echo "engine: apt-get install ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# These machines: cgroup v1 with the cgroupfs manager, rlimits a container
# may not raise, and crun refusing hybrid cgroups.
conf=/etc/containers/containers.conf
want='# evalflow: the settings this machine needs
[containers]
default_ulimits = []

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
'
if [ "$(cat "$conf" 2>/dev/null)" != "$want" ]; then
	$sudo mkdir -p /etc/containers
	printf '%s' "$want" | $sudo tee "$conf" >/dev/null
fi

answers() { curl -sf --max-time 5 --unix-socket "$sock" http://d/v1.41/_ping >/dev/null 2>&1; }

if ! answers; then
	# A service killed with its session leaves its socket, and its
	# containers' processes are gone: clear both before serving again.
	$sudo pkill -f "podman system service" 2>/dev/null || true
	$sudo rm -f "$sock"
	$sudo mkdir -p "$(dirname "$sock")"
	log="${TMPDIR:-/tmp}/evalflow-podman-service.log"
	$sudo podman system migrate >/dev/null 2>&1 || true
	# setsid: the service outlives the make that started it.
	$sudo setsid nohup podman system service --time=0 "unix://$sock" >"$log" 2>&1 < /dev/null &
	for _ in $(seq 1 100); do
		answers && break
		sleep 0.2
	done
	answers || { echo "engine: podman system service did not answer on $sock; its log:" >&2; tail -20 "$log" >&2; exit 1; }
fi

# The base image every test task's FROM names, from Debian's packages.
if ! $sudo podman image exists docker.io/library/debian:bookworm-slim; then
	mkdir -p "$cache"
	tar="$cache/debian-bookworm.tar"
	if [ ! -s "$tar" ]; then
		echo "engine: building a Debian base image with mmdebstrap (about a minute)"
		$sudo mmdebstrap --quiet --format=tar --variant=minbase --include=ca-certificates bookworm "$tar.tmp"
		mv "$tar.tmp" "$tar"
	fi
	$sudo podman import -q "$tar" localhost/debian:bookworm >/dev/null
	for name in bookworm bookworm-slim 12 12-slim latest; do
		$sudo podman tag localhost/debian:bookworm "docker.io/library/debian:$name"
	done
fi
echo "engine: Podman $($sudo podman version --format '{{.Server.Version}}' 2>/dev/null || echo podman) on unix://$sock"
