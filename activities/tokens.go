package activities

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
)

// withTokens adds to s, the summary of a finished rollout of ref, what a
// trainer learns from, read from the stored trace: when the run traces
// tokens, whether it was truncated and its turns' token data; when it
// records policy versions, the oldest version among its turns.
func (a *Activities) withTokens(ctx context.Context, ref rollout.Ref, s rollout.Summary) (rollout.Summary, error) {
	tokens := ref.Harness.TraceTokens || ref.Harness.TokenIn
	versions := ref.PolicyVersion != nil || ref.Harness.PolicyVersionHeader != ""
	if !tokens && !versions || s.Verify != nil || s.Trace == "" && !tokens {
		return s, nil
	}
	tr, err := a.Store.Trace(ctx, ref.RunID, s.Key)
	if err != nil {
		return s, fmt.Errorf("read trace of %s: %w", s.Key, err)
	}
	if tokens {
		s.Truncated = Truncated(tr.Turns)
		s.Tokens, s.TokensCut = turnTokens(tr.Turns)
	}
	s.PolicyVersion = OldestPolicyVersion(tr.Turns)
	return s, nil
}

// OldestPolicyVersion is the lowest policy version that answered one of
// turns, or nil when none says.
func OldestPolicyVersion(turns []trace.Turn) *int64 {
	var oldest *int64
	for _, t := range turns {
		if t.PolicyVersion != nil && (oldest == nil || *t.PolicyVersion < *oldest) {
			v := *t.PolicyVersion
			oldest = &v
		}
	}
	return oldest
}

// Truncated reports whether a limit of the rollout refused one of its
// calls, or a turn's completion stopped at its max tokens.
func Truncated(turns []trace.Turn) bool {
	for _, t := range turns {
		if t.Limit != "" || t.Response.FinishReason == dialects.FinishLength {
			return true
		}
	}
	return false
}

// turnTokens is the token data of the turns that have some, or nothing
// and cut when it is larger than rollout.MaxSummaryTokenBytes.
func turnTokens(turns []trace.Turn) (out []rollout.TurnTokens, cut bool) {
	size := 0
	for _, t := range turns {
		if t.Tokens.Empty() {
			continue
		}
		data, err := json.Marshal(t.Tokens)
		if err != nil {
			continue
		}
		size += len(data)
		if size > rollout.MaxSummaryTokenBytes {
			return nil, true
		}
		out = append(out, rollout.TurnTokens{Turn: t.Index, FinishReason: t.Response.FinishReason,
			TokenIn: t.TokenIn, PolicyVersion: t.PolicyVersion, Data: data})
	}
	return out, false
}
