package activities_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/activities"
	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/trace"
)

// Each turn records the policy version that answered it: the upstream's
// header when the run names one and the upstream sends it, else the version
// the rollout was started on. The summary carries the oldest, whether or
// not the run traces tokens.
func TestTurnsRecordThePolicyVersionThatAnswered(t *testing.T) {
	v := func(n int64) *int64 { return &n }
	for _, tc := range []struct {
		name      string
		header    string  // the run's PolicyVersionHeader
		startedOn *int64  // Ref.PolicyVersion
		upstream  []int64 // the mock's version before each call; nil: none set
		want      []*int64
		oldest    *int64
	}{
		{"the upstream's header, moving mid-rollout", "x-policy-version", v(1), []int64{5, 7}, []*int64{v(5), v(7)}, v(5)},
		{"no header sent: the version started on", "x-policy-version", v(2), nil, []*int64{v(2), v(2)}, v(2)},
		{"no header named: the version started on", "", v(3), []int64{5, 7}, []*int64{v(3), v(3)}, v(3)},
		{"nothing known", "", nil, nil, []*int64{nil, nil}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := mock.New(mock.Config{PolicyVersionHeader: "x-policy-version"})
			require.NoError(t, err)
			up := httptest.NewServer(m)
			t.Cleanup(up.Close)
			r := newRigWith(t, providers.NewOpenAI(up.URL+"/v1", "k"), func(ctx context.Context, spec harness.Spec) (harness.Result, error) {
				for i := range 2 {
					if tc.upstream != nil {
						m.SetPolicyVersion(tc.upstream[i])
					}
					if _, err := callModel(ctx, spec); err != nil {
						return harness.Result{}, err
					}
				}
				return harness.Result{Answer: spec.Task.Answer}, nil
			})
			ref := ref(1)
			ref.Harness.PolicyVersionHeader = tc.header
			ref.PolicyVersion = tc.startedOn
			s, err := r.rollout(t, ref)
			require.NoError(t, err)
			tr, err := r.store.Trace(context.Background(), "run", s.Key)
			require.NoError(t, err)
			require.Len(t, tr.Turns, 2)
			for i, turn := range tr.Turns {
				assert.Equal(t, tc.want[i], turn.PolicyVersion, "turn %d", i)
			}
			assert.Equal(t, tc.oldest, s.PolicyVersion)
			assert.Empty(t, s.Tokens, "tokens are not traced")
		})
	}
}

func TestOldestPolicyVersion(t *testing.T) {
	v := func(n int64) *int64 { return &n }
	for _, tc := range []struct {
		turns []*int64
		want  *int64
	}{
		{nil, nil},
		{[]*int64{nil, nil}, nil},
		{[]*int64{v(4), nil, v(2), v(3)}, v(2)},
		{[]*int64{nil, v(0)}, v(0)},
	} {
		var turns []trace.Turn
		for _, p := range tc.turns {
			turns = append(turns, trace.Turn{PolicyVersion: p})
		}
		assert.Equal(t, tc.want, activities.OldestPolicyVersion(turns), "OldestPolicyVersion(%v)", tc.turns)
	}
}
