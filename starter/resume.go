package main

import (
	"context"
	"fmt"
	"reflect"

	"github.com/urfave/cli/v2"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/evalflow/evalflow/workflows"
)

// startInput reads the input a run's execution was started with.
func startInput(ctx context.Context, c client.Client, workflowID, runID string) (workflows.TrainInput, error) {
	var in workflows.TrainInput
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return in, fmt.Errorf("run %s has no history", workflowID)
	}
	ev, err := it.Next()
	if err != nil {
		return in, fmt.Errorf("read history of %s: %w", workflowID, err)
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return in, fmt.Errorf("run %s: history does not start with the run's input", workflowID)
	}
	if err := converter.GetDefaultDataConverter().FromPayloads(attrs.GetInput(), &in); err != nil {
		return in, fmt.Errorf("decode the input of %s: %w", workflowID, err)
	}
	in.State = nil // a resume starts from the run store, not from a dead run's memory
	return in, nil
}

// configChange is a run's stored input with the flags given on the command
// line applied, and the settings they changed.
type configChange struct {
	input  workflows.TrainInput
	fields []string
}

// changedConfig applies the flags set on the command line to the stored input.
func changedConfig(cctx *cli.Context, old workflows.TrainInput) (configChange, error) {
	given, err := runConfig(cctx)
	if err != nil {
		return configChange{}, err
	}
	given.RunID = old.Config.RunID
	ch := configChange{input: old}
	cfg, train := &ch.input.Config, &ch.input.Train
	apply := func(flag string, dst, src any) {
		if !cctx.IsSet(flag) {
			return
		}
		d, s := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
		if !reflect.DeepEqual(d.Interface(), s.Interface()) {
			ch.fields = append(ch.fields, "--"+flag)
			d.Set(s)
		}
	}
	epochs, maxFailures := cctx.Int("epochs"), cctx.Float64("max-failures")
	apply("taskset", &cfg.Taskset, &given.Taskset)
	apply("tasks", &cfg.Tasks, &given.Tasks)
	apply("group-size", &cfg.RolloutsPerTask, &given.RolloutsPerTask)
	apply("max-concurrent", &cfg.MaxConcurrent, &given.MaxConcurrent)
	apply("seed", &cfg.Seed, &given.Seed)
	apply("shuffle", &cfg.Shuffle, &given.Shuffle)
	apply("model", &cfg.Model, &given.Model)
	apply("temperature", &cfg.Sampling.Temperature, &given.Sampling.Temperature)
	apply("top-p", &cfg.Sampling.TopP, &given.Sampling.TopP)
	apply("max-tokens", &cfg.Sampling.MaxTokens, &given.Sampling.MaxTokens)
	apply("harness", &cfg.Harness.Command, &given.Harness.Command)
	apply("harness-timeout", &cfg.Harness.Timeout, &given.Harness.Timeout)
	apply("max-turns", &cfg.Harness.MaxTurns, &given.Harness.MaxTurns)
	apply("rubric", &cfg.Rubric, &given.Rubric)
	apply("max-attempts", &cfg.Limits.MaxAttempts, &given.Limits.MaxAttempts)
	apply("continue-as-new-after", &cfg.Limits.ContinueAsNewAfter, &given.Limits.ContinueAsNewAfter)
	apply("epochs", &train.Epochs, &epochs)
	apply("max-failures", &train.MaxFailures, &maxFailures)
	return ch, nil
}
