# evalflow: `make run` runs a 128-task eval on an embedded Temporal server;
# `make test` runs every test.
GO      ?= go
TASKS   ?= 128
ARGS    ?=

.PHONY: run build test test-short lint bench compose-check clean

run:
	$(GO) run ./starter eval --tasks $(TASKS) $(ARGS)

build:
	$(GO) build -o bin/starter ./starter
	$(GO) build -o bin/worker ./worker

test:
	$(GO) test -race -count=1 -timeout 30m ./...

# Unit tests only: skips the end-to-end runs on the embedded server.
test-short:
	$(GO) test -race -count=1 -short ./...

lint:
	$(GO) vet ./...
	$(GO) tool workflowcheck ./workflows/...

bench:
	@echo "no benchmarks yet"

clean:
	rm -rf bin .evalflow runs
