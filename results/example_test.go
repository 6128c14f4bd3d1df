package results_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
)

func ExampleFiles_Put() {
	root, err := os.MkdirTemp("", "runs")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	ctx := context.Background()
	store, err := results.Open(root)
	if err != nil {
		log.Fatal(err)
	}

	rec := results.Record{
		Key:    rollout.Key("run-1", 0, 42, 0),
		RunID:  "run-1",
		Index:  42,
		TaskID: "gsm8k-42",
		Reward: 1,
		Status: rollout.StatusOK,
	}
	stored, existed, err := store.Put(ctx, rec, &trace.Rollout{Key: rec.Key, Reward: 1})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(stored.Key, stored.Trace, existed)

	// A retry of the same rollout writes nothing.
	_, existed, err = store.Put(ctx, rec, &trace.Rollout{Key: rec.Key, Reward: 1})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(existed)
	// Output:
	// run-1/0/42/0 traces/run-1~0~42~0.json false
	// true
}
