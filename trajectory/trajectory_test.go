package trajectory_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
	"github.com/evalflow/evalflow/trajectory"
)

// turn is an answered call whose prompt and completion have the ids given;
// logprobs are -(i+1)/10 for completion token i.
func turn(i int, prompt, completion []int32) trace.Turn {
	lp := make(dialects.Float32s, len(completion))
	for k := range lp {
		lp[k] = -float32(k+1) / 10
	}
	return trace.Turn{Index: i, Status: 200,
		Request:  dialects.Request{Messages: []dialects.Message{{Role: "user", Content: []dialects.Part{{Type: "text", Text: "q"}}}}},
		Response: dialects.Response{Message: dialects.Message{Role: "assistant", Content: []dialects.Part{{Type: "text", Text: "a"}}}, FinishReason: dialects.FinishStop},
		Tokens:   &dialects.Tokens{PromptIDs: prompt, CompletionIDs: completion, Logprobs: lp}}
}

func cat(parts ...[]int32) []int32 {
	var out []int32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestStepsThatExtendEachOtherAreOneSample(t *testing.T) {
	p0, c0 := []int32{1, 2, 3}, []int32{10, 11}
	env1, c1 := []int32{4, 5}, []int32{12}
	env2, c2 := []int32{6}, []int32{13, 14, 15}
	turns := []trace.Turn{
		turn(0, p0, c0),
		turn(1, cat(p0, c0, env1), c1),
		{Index: 2, Status: 502, UpstreamFailure: trace.UpstreamStatus}, // not a step
		turn(3, cat(p0, c0, env1, c1, env2), c2),
	}
	tr := trajectory.FromTurns(turns)
	require.Len(t, tr.Steps, 3)
	assert.True(t, tr.Interleavable)
	assert.Empty(t, tr.PrefixBreaks)
	assert.Equal(t, []bool{false, true, true}, []bool{tr.Steps[0].ExtendsPrevious, tr.Steps[1].ExtendsPrevious, tr.Steps[2].ExtendsPrevious})
	assert.Equal(t, []int{0, 0, 0}, tr.Steps[0].Tokens.PromptMask)
	assert.Equal(t, []int{1, 1}, tr.Steps[0].Tokens.CompletionMask)
	assert.Equal(t, 3, tr.Steps[2].Turn)
	assert.Equal(t, "assistant", tr.Steps[0].Completion[0].Role)

	samples := tr.Interleaved()
	require.Len(t, samples, 1)
	s := samples[0]
	assert.Equal(t, []int{0, 1, 2}, s.Steps)
	assert.Equal(t, p0, s.PromptIDs)
	assert.Equal(t, cat(c0, env1, c1, env2, c2), s.CompletionIDs)
	assert.Equal(t, []int{1, 1, 0, 0, 1, 0, 1, 1, 1}, s.CompletionMask)
	assert.Equal(t, []float32{-0.1, -0.2, 0, 0, -0.1, 0, -0.1, -0.2, -0.3}, s.CompletionLogprobs)
	// The last step's whole sequence is the sample's.
	last := tr.Steps[2].Tokens
	assert.Equal(t, cat(last.PromptIDs, last.CompletionIDs), cat(s.PromptIDs, s.CompletionIDs))

	per := tr.PerStep()
	require.Len(t, per, 3)
	assert.Equal(t, cat(p0, c0, env1), per[1].PromptIDs)
	assert.Equal(t, c1, per[1].CompletionIDs)
}

func TestARetokenizedTurnBreaksThePrefix(t *testing.T) {
	p0, c0 := []int32{1, 2, 3}, []int32{10, 11}
	// The server tokenized turn 0's completion again as one token (21),
	// not the two the policy sampled.
	p1 := cat(p0, []int32{21}, []int32{4})
	tr := trajectory.FromTurns([]trace.Turn{turn(0, p0, c0), turn(1, p1, []int32{12})})
	assert.False(t, tr.Interleavable)
	assert.Equal(t, []int{1}, tr.PrefixBreaks)
	assert.False(t, tr.Steps[1].ExtendsPrevious)

	samples := tr.Interleaved()
	require.Len(t, samples, 2, "a sample starts where the prefix breaks")
	assert.Equal(t, []int{0}, samples[0].Steps)
	assert.Equal(t, []int{1}, samples[1].Steps)
	assert.Equal(t, p1, samples[1].PromptIDs)
	assert.Equal(t, []int32{12}, samples[1].CompletionIDs)
}

func TestAStepWithoutTokensIsNotInterleavable(t *testing.T) {
	p0, c0 := []int32{1}, []int32{2}
	noTokens := turn(1, nil, nil)
	noTokens.Tokens = nil
	tr := trajectory.FromTurns([]trace.Turn{turn(0, p0, c0), noTokens, turn(2, cat(p0, c0, []int32{3}), []int32{4})})
	assert.False(t, tr.Interleavable)
	assert.Nil(t, tr.Steps[1].Tokens)
	assert.Equal(t, []int{2}, tr.PrefixBreaks, "the step after one without tokens starts a sample")
	assert.Len(t, tr.Interleaved(), 2)
	assert.Len(t, tr.PerStep(), 2)
}

func TestFromSummaryReadsThePackedTokenData(t *testing.T) {
	v := int64(7)
	t0 := turn(0, []int32{1, 2}, []int32{3})
	t1 := turn(1, []int32{1, 2, 3, 4}, []int32{5})
	t1.Tokens.Logprobs = nil
	var tt []rollout.TurnTokens
	for _, tu := range []trace.Turn{t0, t1} {
		data, err := json.Marshal(tu.Tokens)
		require.NoError(t, err)
		tt = append(tt, rollout.TurnTokens{Turn: tu.Index, FinishReason: dialects.FinishLength, TokenIn: tu.Index == 1, PolicyVersion: &v, Data: data})
	}
	tr, err := trajectory.FromSummary(tt)
	require.NoError(t, err)
	require.Len(t, tr.Steps, 2)
	assert.True(t, tr.Interleavable)
	assert.True(t, tr.Steps[1].TokenIn)
	assert.True(t, tr.Steps[0].IsTruncated)
	assert.Equal(t, int64(7), *tr.Steps[0].PolicyVersion)
	assert.False(t, tr.Steps[0].MissingLogprobs)
	assert.True(t, tr.Steps[1].MissingLogprobs, "logprobs the upstream did not return are said so")
	assert.Nil(t, tr.Steps[0].Prompt)

	_, err = trajectory.FromSummary([]rollout.TurnTokens{{Turn: 3, Data: json.RawMessage(`{"prompt_ids": "!!"}`)}})
	require.ErrorContains(t, err, "turn 3")
}

func TestSamplesNamesTheViews(t *testing.T) {
	tr := trajectory.FromTurns([]trace.Turn{turn(0, []int32{1}, []int32{2})})
	s, err := tr.Samples("")
	require.NoError(t, err)
	assert.Len(t, s, 1)
	_, err = tr.Samples("tokens")
	require.ErrorContains(t, err, `"interleaved" or "steps"`)
}

func TestJSONUsesVerifiersFieldNames(t *testing.T) {
	tr := trajectory.FromTurns([]trace.Turn{turn(0, []int32{1}, []int32{2})})
	b, err := json.Marshal(tr.Interleaved()[0])
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	for _, k := range []string{"steps", "prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "completion_logprobs"} {
		assert.Contains(t, m, k)
	}
	assert.Equal(t, []any{float64(1)}, m["prompt_ids"], "ids are plain JSON numbers")
}
