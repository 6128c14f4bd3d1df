#!/usr/bin/env bash
# bare-machine.sh [COMMAND…]: the README's two commands on a bare machine,
# proven. A fresh container (Debian with git and make, Go mounted read-only
# at /usr/local/go, nothing else) clones this checkout's HEAD and runs each
# COMMAND in turn with no other step (default: `make run`, then
# `make test`); after `make run` it checks that the run stored its 128
# rollouts. The Go module cache is shared with this machine (downloads
# are not what is being proven). `make run` builds from a cold build cache
# of the container's own: that is the newcomer's first command. The
# commands after it (`make test`, `make lint`) use this machine's build
# cache, seeded with what `make run` compiled: what they prove is that the
# tests pass with nothing installed, not how long a cold race build takes,
# and on a machine that ran them before their race build is the cache's. The container is privileged: `make test` installs and
# serves a container engine, makes network namespaces and sandboxes inside it.
# Its network is a bridge of its own: its loopback servers meet nobody's.
# Needs the engine of `make engine` on this machine. CI runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- "make run" "make test"
export DOCKER_HOST="${DOCKER_HOST:-unix:///run/podman/podman.sock}"

image=localhost/evalflow-bare:bookworm
goroot=$(go env GOROOT)
modcache=$(go env GOMODCACHE)
gocache=$(go env GOCACHE)
mkdir -p "$gocache"
work=$(mktemp -d "${TMPDIR:-/var/tmp}/evalflow-bare.XXXXXX")
name="evalflow-bare-$$"
cleanup() {
	podman rm -f "$name" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

# The machine's trust store comes along: on these machines the network's
# egress presents its own certificate authority, which a fresh machine here
# trusts too.
mkdir -p "$work/image/ca"
cp /usr/local/share/ca-certificates/*.crt "$work/image/ca/" 2>/dev/null || true
cat > "$work/image/Containerfile" <<'EOF'
FROM docker.io/library/debian:bookworm
COPY ca/ /usr/local/share/ca-certificates/
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	git make ca-certificates >/dev/null && update-ca-certificates >/dev/null 2>&1 && rm -rf /var/lib/apt/lists/*
EOF
echo "bare: building $image (Debian, git, make)"
podman build -q --network=host -t "$image" "$work/image" >/dev/null

git rev-parse HEAD > "$work/commit"
echo "bare: a fresh container runs the README's two commands on $(cut -c1-12 "$work/commit")"
mkdir -p "$work/containers"
# The viewer's browser test leaves its screenshots here.
artifacts="${EVALFLOW_ARTIFACTS:-$PWD/.ci/artifacts}"
mkdir -p "$artifacts"
podman run --rm --name "$name" --privileged \
	-v "$PWD:/src:ro" \
	-v "$goroot:/usr/local/go:ro" \
	-v "$modcache:/root/go/pkg/mod" \
	-v "$gocache:/root/.cache/go-build-shared" \
	-v "$work/containers:/var/lib/containers" \
	-v "$artifacts:/artifacts" -e EVALFLOW_ARTIFACTS=/artifacts \
	-e SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
	-e NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
	-e GOTOOLCHAIN=local -e GOFLAGS=-buildvcs=false -e CI="${CI:-}" \
	-e PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	"$image" bash -euo pipefail -c '
		git config --global --add safe.directory "*"
		git clone -q /src /root/evalflow
		cd /root/evalflow
		for cmd in "$@"; do
			echo "== stage: $cmd"
			start=$SECONDS
			$cmd
			echo "== stage: $cmd: $((SECONDS - start)) s"
			if [ "$cmd" = "make run" ]; then
				run=$(ls -td runs/*/ | head -1)
				test "$(wc -l < "$run/rollouts.jsonl")" -eq 128
				test -s "$run/summary.json"
				echo "bare: make run stored 128 rollouts in $run"
				start=$SECONDS
				cp -rn "$(go env GOCACHE)/." /root/.cache/go-build-shared/
				export GOCACHE=/root/.cache/go-build-shared
				echo "== stage: the build cache of make run added to the shared one: $((SECONDS - start)) s"
			fi
		done
	' bare "$@"
echo "bare: passed in a fresh container: $*"
