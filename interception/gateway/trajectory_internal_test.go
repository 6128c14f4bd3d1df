package gateway

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/trace"
	"github.com/evalflow/evalflow/trajectory"
)

func TestTrajectoryTruncation(t *testing.T) {
	user := dialects.Message{Role: dialects.RoleUser, Content: []dialects.Part{{Type: dialects.PartText, Text: "go"}}}
	answered := func(finish string) trace.Turn {
		return trace.Turn{Status: 200, Request: dialects.Request{Messages: []dialects.Message{user}},
			Response: dialects.Response{FinishReason: finish, Message: dialects.Message{Role: dialects.RoleAssistant}}}
	}
	for _, tc := range []struct {
		name      string
		turns     []trace.Turn
		truncated bool
		limit     string
	}{
		{"finished", []trace.Turn{answered("stop")}, false, ""},
		{"cut at max tokens", []trace.Turn{answered("stop"), answered("length")}, true, ""},
		{"refused by a limit", []trace.Turn{answered("stop"), {Status: 400, Limit: trace.LimitTurns}}, true, trace.LimitTurns},
		{"no turns", nil, false, ""},
	} {
		tr := trajectoryOf("r", tc.turns, query{view: trajectory.ViewInterleaved})
		assert.Equal(t, tc.truncated, tr.IsTruncated, "trajectoryOf(%s).IsTruncated", tc.name)
		assert.Equal(t, tc.limit, tr.Limit, "trajectoryOf(%s).Limit", tc.name)
		assert.NotNil(t, tr.Prompt, tc.name)
		assert.NotNil(t, tr.Completion, tc.name)
	}
}

func TestTrajectoryHoldsTokensOnce(t *testing.T) {
	tok := &dialects.Tokens{CompletionIDs: dialects.TokenIDs{1, 2}}
	tr := trajectoryOf("r", []trace.Turn{{Index: 0, Status: 200, Tokens: tok}}, query{view: trajectory.ViewInterleaved})
	assert.Len(t, tr.Tokens, 1)
	assert.Same(t, tok, tr.Tokens[0].Tokens)
	assert.Nil(t, tr.Turns[0].Tokens, "the token data is in Tokens only")
}
