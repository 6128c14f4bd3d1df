package tokenin

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/trace"
	"github.com/evalflow/evalflow/trajectory"
)

// The mask check passes the samples trajectory makes and names what is
// wrong with one that masks an environment token in or a sampled token
// out, or leaves a step out.
func TestMaskedFindsWhatIsWrong(t *testing.T) {
	turn := func(i int, prompt, completion []int32) trace.Turn {
		return trace.Turn{Index: i, Status: 200, Tokens: &dialects.Tokens{PromptIDs: prompt, CompletionIDs: completion}}
	}
	traj := trajectory.FromTurns([]trace.Turn{turn(0, []int32{1, 2}, []int32{3, 4}), turn(1, []int32{1, 2, 3, 4, 5, 6}, []int32{7})})
	s := traj.Interleaved()
	assert.Len(t, s, 1)
	assert.Empty(t, masked(traj, s[0]))

	for name, c := range map[string]struct {
		mutate func(*trajectory.Sample)
		want   string
	}{
		"environment in": {func(s *trajectory.Sample) { s.CompletionMask[2] = 1 }, "an environment token before step 1 is not masked out"},
		"sampled out":    {func(s *trajectory.Sample) { s.CompletionMask[4] = 0 }, "a token step 1 sampled has mask 0"},
		"prompt in":      {func(s *trajectory.Sample) { s.PromptMask[0] = 1 }, "the prompt is not the first step's, masked out"},
		"step left out": {func(s *trajectory.Sample) {
			s.CompletionIDs, s.CompletionMask, s.CompletionLogprobs = s.CompletionIDs[:4], s.CompletionMask[:4], s.CompletionLogprobs[:4]
		}, "step 1's sampled tokens are not where the sample has them"},
	} {
		bad := traj.Interleaved()[0]
		c.mutate(&bad)
		assert.Equal(t, c.want, masked(traj, bad), name)
	}
}

func TestNthIndex(t *testing.T) {
	assert.Equal(t, 1, nthIndex("a<e>b<e>", "<e>", 1))
	assert.Equal(t, 5, nthIndex("a<e>b<e>", "<e>", 2))
	assert.Equal(t, -1, nthIndex("a<e>b<e>", "<e>", 3))
}
