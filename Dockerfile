# syntax=docker/dockerfile:1

# The evalflow worker image: built by docker-compose.yml's worker service.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# Static binary: the runtime image needs no Go toolchain and no libc match.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/worker ./worker \
    && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/evalflow-agent ./cmd/evalflow-agent

# Slim Debian rather than distroless: harness programs run as subprocesses of
# the worker and want a shell (and room to add python or node).
FROM debian:trixie-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --create-home evalflow \
    && mkdir -p /runs \
    && chown evalflow:evalflow /runs
# The built-in agent beside the worker: rollouts run this small program, not
# the worker binary.
COPY --from=build /out/worker /out/evalflow-agent /usr/local/bin/
USER evalflow
WORKDIR /home/evalflow
ENV EVALFLOW_RUNS_DIR=/runs
ENTRYPOINT ["/usr/local/bin/worker"]
