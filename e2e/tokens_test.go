package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/pull"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trajectory"
)

// A trainer pulling groups of a run that traces tokens gets each rollout's
// token ids and logprobs per turn, as the trace recorded them from the
// (mock) upstream; a run that does not gets none.
func TestPullReturnsTokenData(t *testing.T) {
	t.Parallel()
	tc := newTrainCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, traced := range []bool{true, false} {
		in := trainConfig("pull-tokens-"+map[bool]string{true: "on", false: "off"}[traced], filepath.Join(t.TempDir(), "never"))
		in.Train.Epochs = 0
		in.Config.Harness = rollout.HarnessConfig{TraceTokens: traced, TopLogprobs: 1}
		p, err := pull.Start(ctx, tc.c, tc.queue, in.Config, in.Train)
		require.NoError(t, err)
		ref, err := p.Sample(ctx)
		require.NoError(t, err)
		res, err := p.RunGroup(ctx, ref, 2)
		require.NoError(t, err)
		require.Len(t, res.Rollouts, 2)
		if traced {
			require.Len(t, res.Trajectories, 2, "a trajectory per rollout")
			samples, err := res.Samples(trajectory.ViewInterleaved)
			require.NoError(t, err)
			for k, tr := range res.Trajectories {
				assert.True(t, tr.Interleavable, "rollout %d: each turn extends the one before", k)
				assert.Len(t, tr.Steps, res.Rollouts[k].Turns)
				assert.Len(t, samples[k], 1)
			}
		} else {
			assert.Nil(t, res.Trajectories)
		}
		for _, s := range res.Rollouts {
			require.Equal(t, rollout.StatusOK, s.Status, s.Error)
			if !traced {
				assert.Empty(t, s.Tokens, "no token data unless the run asks")
				continue
			}
			tr, err := tc.store.Trace(ctx, in.Config.RunID, s.Key)
			require.NoError(t, err)
			require.Len(t, s.Tokens, len(tr.Turns), "every turn has token data")
			assert.False(t, s.TokensCut)
			assert.False(t, s.Truncated)
			for i, tt := range s.Tokens {
				turn := tr.Turns[i]
				assert.Equal(t, turn.Index, tt.Turn)
				assert.Equal(t, turn.Response.FinishReason, tt.FinishReason)
				var tok dialects.Tokens
				require.NoError(t, json.Unmarshal(tt.Data, &tok))
				assert.Equal(t, *turn.Tokens, tok, "the trace's token data")
				assert.NotEmpty(t, tok.PromptIDs)
				require.NotEmpty(t, tok.CompletionIDs)
				assert.Len(t, tok.Logprobs, len(tok.CompletionIDs))
				assert.Equal(t, 1, tok.TopK)
			}
			last := tr.Turns[len(tr.Turns)-1]
			var lastTok dialects.Tokens
			require.NoError(t, json.Unmarshal(s.Tokens[len(s.Tokens)-1].Data, &lastTok))
			assert.Equal(t, dialects.TokenIDs(mock.TokenIDs(last.Response.Message.Text())), lastTok.CompletionIDs,
				"the answer's token ids, as the mock tokenizes it")
		}
		require.NoError(t, p.Close(ctx))
	}
}

// With a model whose re-tokenization of a conversation differs from what
// it sampled (the mock's merge mode), a run's turn 2 prompt does not
// extend turn 1's prompt and completion ids; with token-in it does,
// exactly, and the trace and the pulled rollout say which turns went in as
// tokens.
func TestTokenInPull(t *testing.T) {
	t.Parallel()
	_, c := devtest.StartEvalflow(t)
	runsDir := t.TempDir()
	store := storetest.Files(t, runsDir)
	startWorker(t, c, wiring.Config{
		TaskQueue: "token-in", RunsDir: runsDir, MaxRollouts: 4, Runtime: newRecordingRuntime(),
		Mock: mock.Config{TokenMerge: true},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	for _, tokenIn := range []bool{false, true} {
		in := trainConfig("token-in-"+map[bool]string{true: "on", false: "off"}[tokenIn], filepath.Join(t.TempDir(), "never"))
		in.Train.Epochs = 0
		in.Config.Harness = rollout.HarnessConfig{TraceTokens: true, TokenIn: tokenIn}
		p, err := pull.Start(ctx, c, "token-in", in.Config, in.Train)
		require.NoError(t, err)
		ref, err := p.Sample(ctx)
		require.NoError(t, err)
		res, err := p.RunGroup(ctx, ref, 1)
		require.NoError(t, err)
		require.Len(t, res.Rollouts, 1)
		s := res.Rollouts[0]
		require.Equal(t, rollout.StatusOK, s.Status, s.Error)
		tr, err := store.Trace(ctx, in.Config.RunID, s.Key)
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(tr.Turns), 2, "the agent calls the calculator, then answers")
		require.Len(t, s.Tokens, len(tr.Turns))
		for i, turn := range tr.Turns {
			require.NotNil(t, turn.Tokens, "turn %d", i)
			assert.Equal(t, tokenIn && i > 0, turn.TokenIn, "turn %d went in as tokens", i)
			assert.Equal(t, turn.TokenIn, s.Tokens[i].TokenIn, "the pulled rollout says so too")
			if i == 0 {
				continue
			}
			prev := append(append([]int32{}, tr.Turns[i-1].Tokens.PromptIDs...), tr.Turns[i-1].Tokens.CompletionIDs...)
			prompt := []int32(turn.Tokens.PromptIDs)
			extends := len(prompt) > len(prev) && slices.Equal(prev, prompt[:len(prev)])
			assert.Equal(t, tokenIn, extends, "turn %d's prompt extends turn %d's ids", i, i-1)
		}
		// What the trainer is told: the re-tokenized rollout is flagged,
		// and broken into a sample per step; token-in makes it one.
		require.Len(t, res.Trajectories, 1)
		traj := res.Trajectories[0]
		assert.Equal(t, tokenIn, traj.Interleavable, "the trajectory says whether the prefix holds")
		samples, err := res.Samples(trajectory.ViewInterleaved)
		require.NoError(t, err)
		if tokenIn {
			assert.Empty(t, traj.PrefixBreaks)
			assert.Len(t, samples[0], 1)
		} else {
			assert.NotEmpty(t, traj.PrefixBreaks, "where the prefix breaks")
			assert.Len(t, samples[0], len(traj.PrefixBreaks)+1)
		}
		require.NoError(t, p.Close(ctx))
	}
}
