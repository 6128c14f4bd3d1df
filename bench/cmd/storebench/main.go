// Command storebench measures the run stores against each other in one
// run: rollout writes per second and write latency (p50, p99) with many
// concurrent writers and 50 KB traces, and the wall time of an eval on the
// embedded Temporal server writing each store. Figures go to stdout as a
// markdown table, with the PostgreSQL/files ratio; BENCHMARKS.md records them.
//
//	go run ./bench/cmd/storebench -store postgres://… -writers 64 -writes 3000 -eval 2000
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/evalflow/evalflow/bench/internal/orchestration"
	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/postgres"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "storebench:", err)
		os.Exit(1)
	}
}

type writeResult struct {
	store          string
	writes         int
	seconds        float64
	perSec         float64
	p50, p99, pmax time.Duration
}

func run() error {
	def := os.Getenv("EVALFLOW_STORE")
	if def == "" {
		def = os.Getenv("EVALFLOW_TEST_POSTGRES")
	}
	if def == "" {
		def = "postgres://evalflow:evalflow@127.0.0.1:5432/evalflow_test?sslmode=disable"
	}
	storeURL := flag.String("store", def, "PostgreSQL server to measure (a schema of its own is created and dropped)")
	writers := flag.Int("writers", 64, "concurrent writers")
	writes := flag.Int("writes", 3000, "rollouts written per store")
	traceKB := flag.Int("trace-kb", 50, "trace size in KB (JSON, before compression)")
	evalN := flag.Int("eval", 2000, "rollouts of the eval run on each store (0: none)")
	flag.Parse()
	ctx := context.Background()

	pgURL, drop, err := scratchSchema(ctx, *storeURL)
	if err != nil {
		return err
	}
	defer drop()
	dir, err := os.MkdirTemp("", "evalflow-storebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	open := map[string]func() (results.Store, error){
		"files": func() (results.Store, error) { return results.Open(filepath.Join(dir, "runs")) },
		"postgres": func() (results.Store, error) {
			return postgres.Open(ctx, pgURL, postgres.Options{MaxConns: int32(*writers)})
		},
	}
	tr := bigTrace(*traceKB << 10)
	var rows []writeResult
	// Alternate the order over two rounds so neither store always runs on a
	// warmer (or busier) machine; each figure is the better round.
	for round, order := range [][]string{{"files", "postgres"}, {"postgres", "files"}} {
		for _, name := range order {
			s, err := open[name]()
			if err != nil {
				return err
			}
			r, err := measureWrites(ctx, s, fmt.Sprintf("bench-%s-%d", name, round), *writers, *writes, tr)
			s.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			r.store = name
			fmt.Fprintf(os.Stderr, "round %d %-8s %6.0f writes/s p50 %v p99 %v max %v\n", round, name, r.perSec, r.p50, r.p99, r.pmax)
			if i := slices.IndexFunc(rows, func(w writeResult) bool { return w.store == name }); i < 0 {
				rows = append(rows, r)
			} else if r.perSec > rows[i].perSec {
				rows[i] = r
			}
		}
	}
	slices.SortFunc(rows, func(a, b writeResult) int { return strings.Compare(a.store, b.store) })
	fmt.Printf("### Rollout writes: %d concurrent writers, %d KB traces, %d writes per store\n\n", *writers, *traceKB, *writes)
	fmt.Println("| store | writes/s | p50 | p99 | max | writes/s vs files |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rows {
		fmt.Printf("| %s | %.0f | %s | %s | %s | %.2f× |\n", r.store, r.perSec, ms(r.p50), ms(r.p99), ms(r.pmax), r.perSec/rows[0].perSec)
	}
	if *evalN <= 0 {
		return nil
	}
	return evalWall(ctx, dir, pgURL, *evalN)
}

// measureWrites has writers goroutines Put n rollouts (a success, with its
// trace) and times each Put.
func measureWrites(ctx context.Context, s results.Store, runID string, writers, n int, tr trace.Rollout) (writeResult, error) {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				key := rollout.Key(runID, 0, int64(i), 0)
				t := tr
				t.Key = key
				rec := results.Record{Key: key, RunID: runID, Index: int64(i), Status: rollout.StatusOK, Reward: 1, Attempt: 1}
				t0 := time.Now()
				_, _, err := s.Put(ctx, rec, &t)
				lat[i] = time.Since(t0)
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return writeResult{}, firstErr
	}
	wall := time.Since(start).Seconds()
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[min(n-1, int(math.Ceil(p*float64(n)))-1)] }
	return writeResult{writes: n, seconds: wall, perSec: float64(n) / wall, p50: q(0.50), p99: q(0.99), pmax: lat[n-1]}, nil
}

// evalWall runs an eval of n no-op rollouts on the embedded server with a
// worker writing each store, and prints the wall times.
func evalWall(ctx context.Context, dir, pgURL string, n int) error {
	srv, err := orchestration.StartServer(ctx, filepath.Join(dir, "temporal"))
	if err != nil {
		return err
	}
	defer srv.Close()
	type row struct {
		store string
		secs  float64
		rps   float64
	}
	var out []row
	for _, name := range []string{"files", "postgres"} {
		cfg := orchestration.Config{Rollouts: n, Concurrency: 64, RunsDir: filepath.Join(dir, "eval-runs")}
		if name == "postgres" {
			cfg.StoreURL = pgURL
		}
		queue := "storebench-" + name
		w, err := orchestration.NewWorker(srv.Client, queue, cfg)
		if err != nil {
			return err
		}
		r, err := orchestration.Temporal(ctx, srv.Client, queue, "storebench-eval-"+name, cfg)
		w.Stop()
		if err != nil {
			return fmt.Errorf("%s eval: %w", name, err)
		}
		if r.Failed > 0 {
			return fmt.Errorf("%s eval: %d rollouts failed", name, r.Failed)
		}
		fmt.Fprintf(os.Stderr, "eval %-8s %d rollouts %.2fs\n", name, n, r.WallSeconds)
		out = append(out, row{name, r.WallSeconds, r.RolloutsPerSec})
	}
	fmt.Printf("\n### Eval of %d no-op rollouts (64 in flight, embedded server, one worker)\n\n", n)
	fmt.Println("| store | wall time | rollouts/s | wall time vs files |")
	fmt.Println("| --- | ---: | ---: | ---: |")
	for _, r := range out {
		fmt.Printf("| %s | %.1f s | %.0f | %.2f× |\n", r.store, r.secs, r.rps, r.secs/out[0].secs)
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// bigTrace is a trace of about size bytes of JSON: turns of prose-like
// text (words drawn at random, so it compresses as a transcript does, not
// as a run of one byte).
func bigTrace(size int) trace.Rollout {
	words := strings.Fields("the model reads the task and calls a tool to compute the sum of the numbers then checks " +
		"its answer against the expected value before it replies with the result and a short explanation of each step")
	rng := mrand.New(mrand.NewPCG(1, 2))
	var tr trace.Rollout
	for len(tr.Turns)*4096 < size {
		var b strings.Builder
		for b.Len() < 4000 {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteByte(' ')
			if rng.IntN(20) == 0 {
				fmt.Fprintf(&b, "%d ", rng.IntN(100000))
			}
		}
		tr.Turns = append(tr.Turns, trace.Turn{Index: len(tr.Turns), Status: 200,
			Response: dialects.Response{Message: dialects.Message{Role: "assistant",
				Content: []dialects.Part{{Type: dialects.PartText, Text: b.String()}}}}})
	}
	return tr
}

// scratchSchema creates a schema of its own on the server and returns a
// URL using it, and its removal.
func scratchSchema(ctx context.Context, raw string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, raw)
	if err != nil {
		return "", nil, fmt.Errorf("reach %s: %w", postgres.Redact(raw), err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	schema := "storebench_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		conn.Close(ctx)
		return "", nil, err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", nil, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), func() {
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		conn.Close(context.Background())
	}, nil
}
