package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTasksetFieldFlags(t *testing.T) {
	cfg, err := parseEval(t, "--taskset", "data/gsm8k.parquet", "--taskset.prompt-field", "question", "--taskset.answer-field", "final answer")
	require.NoError(t, err)
	assert.Equal(t, "data/gsm8k.parquet?answer=final+answer&prompt=question", cfg.Taskset, "the mapping travels in the taskset's name")

	cfg, err = parseEval(t, "--taskset", "data/tasks.csv")
	require.NoError(t, err)
	assert.Equal(t, "data/tasks.csv", cfg.Taskset, "no mapping given: the defaults")
}
