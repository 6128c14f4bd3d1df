// Package bench holds evalflow's benchmarks. Its libraries, under
// bench/internal, are the mock model (upstream), the load generator
// (loadgen), the compared endpoints (targets, among them the Portkey
// gateway as a peer) and the orchestration runs (orchestration);
// bench/cmd/bench runs them all and
// writes results.json and BENCHMARKS.md. The Go benchmarks in this
// package measure the interception handler's cost per request:
// go test -run '^$' -bench . -benchmem ./bench/
package bench
