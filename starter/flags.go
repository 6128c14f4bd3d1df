package main

import (
	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/wiring"
)

// Flags shared by the commands that talk to Temporal.
var (
	addressFlag = &cli.StringFlag{
		Name: "address", Value: "localhost:7233", EnvVars: []string{"EVALFLOW_ADDRESS", "TEMPORAL_ADDRESS"},
		Usage: "Temporal frontend; when nothing answers at a local address, an embedded server is started there",
	}
	namespaceFlag = &cli.StringFlag{
		Name: "namespace", Value: "default", EnvVars: []string{"EVALFLOW_NAMESPACE", "TEMPORAL_NAMESPACE"},
		Usage: "Temporal namespace",
	}
	taskQueueFlag = &cli.StringFlag{
		Name: "task-queue", Value: wiring.DefaultTaskQueue, EnvVars: []string{"EVALFLOW_TASK_QUEUE"},
		Usage: "task queue the workers poll",
	}
	dataDirFlag = &cli.StringFlag{
		Name: "data-dir", Value: ".evalflow", EnvVars: []string{"EVALFLOW_DATA_DIR"},
		Usage: "where the embedded Temporal server keeps its SQLite file and log",
	}
	runsDirFlag = &cli.StringFlag{
		Name: "runs-dir", Value: "runs", EnvVars: []string{"EVALFLOW_RUNS_DIR"},
		Usage: "run store: runs/<run-id>/ holds rollouts.jsonl, traces and summary.json",
	}
	uiPortFlag = &cli.IntFlag{
		Name: "ui-port", Value: 8233, EnvVars: []string{"EVALFLOW_UI_PORT"},
		Usage: "port of the embedded Temporal Web UI (-1 disables it)",
	}
)

// Flags that configure an in-process worker.
var (
	baseURLFlag = &cli.StringFlag{
		Name: "base-url", EnvVars: []string{"OPENAI_BASE_URL"},
		Usage: "OpenAI-compatible provider, e.g. https://api.openai.com/v1 (empty: the offline mock model)",
	}
	apiKeyEnvFlag = &cli.StringFlag{
		Name:  "api-key-env",
		Usage: "name of the environment variable holding the provider's API key (the key itself never leaves the worker; default OPENAI_API_KEY, or ANTHROPIC_API_KEY with --upstream-dialect anthropic)",
	}
	upstreamDialectFlag = &cli.StringFlag{
		Name: "upstream-dialect", Value: "chat", EnvVars: []string{"EVALFLOW_UPSTREAM_DIALECT"},
		Usage: "wire format of the provider: chat, responses or anthropic (calls in another dialect are translated)",
	}
	maxRolloutsFlag = &cli.IntFlag{
		Name: "worker-rollouts", Value: 64, Usage: "rollouts one worker runs at once",
	}
	multiplexFlag = &cli.IntFlag{
		Name: "multiplex", Value: 32, Usage: "rollouts sharing one interception server",
	}
	mockLatencyFlag = &cli.DurationFlag{
		Name: "mock-latency", Usage: "added latency of each mock model response",
	}
	mockErrorRateFlag = &cli.Float64Flag{
		Name: "mock-error-rate", Value: 0.1, Usage: "fraction of deliberately wrong mock answers",
	}
)

func workerFlags() []cli.Flag {
	flags := []cli.Flag{baseURLFlag, apiKeyEnvFlag, upstreamDialectFlag, maxRolloutsFlag, multiplexFlag, mockLatencyFlag, mockErrorRateFlag}
	flags = append(flags, wiring.RuntimeFlags()...)
	return append(flags, wiring.InterceptionFlags()...)
}
