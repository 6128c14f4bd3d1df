package activities_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/rollout"
)

// A run that traces tokens gets each turn's token data in the rollout's
// summary, read from its stored trace, and whether a limit cut it.
func TestRunSummaryCarriesTokenData(t *testing.T) {
	m, err := mock.New(mock.Config{})
	require.NoError(t, err)
	up := httptest.NewServer(m)
	t.Cleanup(up.Close)
	for _, tc := range []struct {
		name      string
		traced    bool
		calls     int
		truncated bool
		tokenIn   bool
	}{
		{"traced", true, 2, false, false},
		{"traced, cut by the turn limit", true, 3, true, false},
		{"not traced", false, 2, false, false},
		// A run resumed with --token-in added keeps its stored trace-tokens.
		{"token-in", false, 2, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRigWith(t, providers.NewOpenAI(up.URL+"/v1", "k"), func(ctx context.Context, spec harness.Spec) (harness.Result, error) {
				for range tc.calls {
					if _, err := callModel(ctx, spec); err != nil {
						return harness.Result{}, err
					}
				}
				return harness.Result{Answer: spec.Task.Answer}, nil
			})
			ref := ref(1)
			ref.Harness.MaxTurns = 2
			ref.Harness.TraceTokens = tc.traced
			ref.Harness.TokenIn = tc.tokenIn
			s, err := r.rollout(t, ref)
			require.NoError(t, err)
			if !tc.traced && !tc.tokenIn {
				assert.Empty(t, s.Tokens)
				return
			}
			assert.Equal(t, tc.truncated, s.Truncated)
			require.Len(t, s.Tokens, 2, "the refused call has no token data")
			tr, err := r.store.Trace(context.Background(), "run", s.Key)
			require.NoError(t, err)
			for i, tt := range s.Tokens {
				var tok dialects.Tokens
				require.NoError(t, json.Unmarshal(tt.Data, &tok))
				assert.Equal(t, *tr.Turns[i].Tokens, tok)
				assert.Equal(t, dialects.TokenIDs(mock.TokenIDs("What is 6 times 7?")), tok.PromptIDs)
				assert.Equal(t, dialects.TokenIDs(mock.TokenIDs(tr.Turns[i].Response.Message.Text())), tok.CompletionIDs)
			}
			if tc.truncated {
				assert.Equal(t, rollout.KindLimit+"turns", s.ErrorKind)
			}
		})
	}
}
