package tokenin_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/bench/internal/tokenin"
	"github.com/evalflow/evalflow/internal/chattemplate"
	"github.com/evalflow/evalflow/internal/chattemplate/vllmtest"
	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/harness/agent"
)

func TestMain(m *testing.M) {
	// The workers run the built-in agent as this test binary's "agent".
	agent.ServeIfAsked()
	os.Exit(m.Run())
}

// Through a worker, the built-in agent and the interception, against each
// family's real template and tokenizer: with --token-in every multi-turn
// tool-calling rollout is one sample with no prefix break, every turn but
// the first sent as tokens; each sample's ids read back as the
// conversation and its mask is 1 on exactly the sampled tokens. Without
// token-in, Qwen3's template (which drops the sampled <think> blocks)
// breaks the prefix at every later turn.
func TestTokenInOnRealTemplates(t *testing.T) {
	_, c := devtest.StartEvalflow(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const rollouts = 4
	for _, f := range chattemplate.Families {
		t.Run(f.Name, func(t *testing.T) {
			up := vllmtest.Start(t, vllmtest.Config{Family: f, Script: tokenin.Script(f)})
			runsDir := t.TempDir()
			w, err := tokenin.StartWorker(c, "tokenin-"+f.Name, up, runsDir, []string{os.Args[0], agent.Subcommand})
			require.NoError(t, err)
			t.Cleanup(w.Stop)
			cfg := tokenin.Config{Queue: "tokenin-" + f.Name, RunID: "tokenin-" + f.Name, Upstream: up, Family: f, RunsDir: runsDir, Rollouts: rollouts, TokenIn: true}

			in, err := tokenin.Run(ctx, c, cfg)
			require.NoError(t, err)
			assert.Empty(t, in.Problems)
			assert.Equal(t, rollouts, in.Rollouts)
			assert.Zero(t, in.Failed)
			assert.Equal(t, 4*rollouts, in.Turns, "three turns of tool calls and an answer")
			assert.Zero(t, in.PrefixBreaks)
			assert.Equal(t, rollouts, in.OneSample)
			assert.Equal(t, rollouts, in.Samples)
			assert.Equal(t, in.Turns-rollouts, in.AsTokens, "every turn after the first went as tokens")
			assert.Equal(t, map[string]int{"a rollout's first call": rollouts}, in.AsText)
			assert.Equal(t, in.Samples, in.Detokenized, "the samples read as the conversation")
			assert.Equal(t, in.Samples, in.Masked, "mask 1 on exactly the sampled tokens")
			if f.Name != chattemplate.Qwen3.Name {
				return
			}

			cfg.RunID, cfg.TokenIn = "text-"+f.Name, false
			text, err := tokenin.Run(ctx, c, cfg)
			require.NoError(t, err)
			assert.Empty(t, text.Problems)
			assert.Zero(t, text.Failed)
			assert.Equal(t, 3*rollouts, text.PrefixBreaks, "the template drops the sampled <think> block of every earlier turn")
			assert.Zero(t, text.OneSample)
			assert.Equal(t, map[string]int{"token-in off": text.Turns}, text.AsText)
			assert.Equal(t, text.Samples, text.Detokenized)
			assert.Equal(t, text.Samples, text.Masked)
		})
	}
}
