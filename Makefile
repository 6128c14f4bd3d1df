# evalflow: `make run` runs a 128-task eval on an embedded Temporal server;
# `make test` runs every test.
GO      ?= go
TASKS   ?= 128
ARGS    ?=

.PHONY: run build test faults temporal-server test-short lint bench bench-scale compose-check clean engine setup FORCE

# Binaries and the tests' own builds without cgo: static, and one build of
# the embedded Temporal server in the cache whatever the machine has (a
# machine without a C compiler builds so anyway). The race detector needs
# cgo: its lines say so.
export CGO_ENABLED ?= 0

# The container engine the container runtime and its tests use: Podman's
# Docker API socket (scripts/engine.sh installs and serves it). Another
# engine: set DOCKER_HOST.
DOCKER_HOST ?= unix:///run/podman/podman.sock
export DOCKER_HOST

# The built-in agent is built first: rollouts run this small program rather
# than the starter, which links the Temporal server (internal/wiring/agent.go).
# scripts/build.sh says what a first build is doing (minutes on 2 cores).
run: bin/evalflow-agent bin/starter
	EVALFLOW_AGENT=$(CURDIR)/bin/evalflow-agent bin/starter eval --tasks $(TASKS) $(ARGS)

build: bin/evalflow-agent bin/starter
	@GO=$(GO) bash scripts/build.sh bin/worker ./worker

bin/starter: FORCE
	@GO=$(GO) bash scripts/build.sh $@ ./starter

bin/evalflow-agent: FORCE
	@GO=$(GO) bash scripts/build.sh $@ ./cmd/evalflow-agent

FORCE:

# Podman from Debian, serving the Docker Engine API, with a Debian base
# image built from Debian's packages; idempotent (a few seconds once set up).
engine:
	bash scripts/engine.sh

# What the tests need besides Go and the engine: packages (sshd, iproute2,
# bubblewrap, Chromium, npm, PostgreSQL), the npm packages of the
# vLLM-shaped test upstream and a loopback test database; idempotent.
# EVALFLOW_TEST_POSTGRES, when set, names another database.
setup:
	bash scripts/setup.sh



# Every test: what they need installed while the race detector's build
# compiles, every package with -race (the slowest listed after), then the
# fault suite on its own; each stage's time printed (scripts/test.sh).
test:
	@GO=$(GO) bash scripts/test.sh

# The Temporal server and its SQL tool, from the module go.mod pins, for the
# tests that run it as separate processes (internal/temporalcluster builds
# its own copy; this warms the build cache first, with progress, so that
# the copy is a link of a few seconds).
temporal-server:
	@GO=$(GO) bash scripts/build.sh bin/temporal-server go.temporal.io/server/cmd/server
	@GO=$(GO) bash scripts/build.sh bin/temporal-sql-tool go.temporal.io/server/cmd/tools/sql

# The fault suite (real processes killed, a misbehaving provider, malformed
# input, load): prints its figures as "figure:" lines; RELIABILITY.md has them.
faults: engine setup temporal-server
	$(GO) test -count=1 -v -timeout 30m ./faults/

# Unit tests only: skips the end-to-end runs on the embedded server.
test-short:
	CGO_ENABLED=1 $(GO) test -race '-gcflags=modernc.org/...=-d=checkptr=0' -count=1 -short ./...

lint:
	$(GO) vet ./...
	$(GO) tool workflowcheck ./workflows/...

# Benchmarks, each against its baselines in the same run (a few minutes on 2
# cores): writes bench/results.json and the results section of BENCHMARKS.md.
bench: engine
	$(GO) test -run '^$$' -bench . -benchmem ./bench/ ./dialects/ > bench/gobench.txt
	$(GO) test -run '^$$' -bench . -benchtime 10x ./internal/harness/container/ >> bench/gobench.txt && cat bench/gobench.txt
	$(GO) test -run '^$$' -bench EmbeddedVsCluster -benchtime 1x -count 2 ./bench/internal/orchestration/
	$(GO) test -run '^$$' -bench SweepVsEvals -benchtime 1x -count 5 ./bench/internal/orchestration/
	$(GO) run ./bench/cmd/bench -gobench bench/gobench.txt

# The 20,000-rollout eval (bounded histories, flat worker memory); takes
# several minutes, so it is not part of make bench. Its numbers are kept in
# bench/results.json across later make bench runs.
bench-scale:
	$(GO) run ./bench/cmd/bench -only scale

clean:
	rm -rf bin .evalflow runs
