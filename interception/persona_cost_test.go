package interception_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/internal/prices"
	"github.com/evalflow/evalflow/trace"
)

// A persona's call is priced at the server's prices and kept on its user
// turn, but the user's spend counts against none of the agent's limits: a
// rollout whose --max-cost the persona alone has passed still gets its
// first model call answered, and only the agent's own spend ends it.
func TestPersonaCallIsPricedButNotCountedAgainstMaxCost(t *testing.T) {
	f := dialectFixture(t, dialects.NameChat, mockUpstream(t), func(c *interception.Config) {
		c.Prices = prices.Table{runModel: costPrice}
	})
	limited := limitedRollout(t, f, interception.Limits{CostUSD: 1e-9})
	secret := limited.Secret
	require.True(t, limited.SetTask(json.RawMessage(`{"id":"t","prompt":"What is 2+2?","user":{"persona":"You are a student. {{prompt}}","max_turns":3}}`)))
	for i := range 2 {
		status, body := sideCall(t, http.MethodPost, f.slot.LocalURL+"/user", secret, `{"messages":[{"role":"user","content":"What is 2+2?"},{"role":"assistant","content":"4"}]}`)
		require.Equal(t, http.StatusOK, status, "user turn %d: %s", i+1, body)
	}
	side, ok := limited.Side()
	require.True(t, ok)
	require.Len(t, side.Users, 2)
	var personaUSD float64
	for _, u := range side.Users {
		require.NotNil(t, u.Call)
		require.Positive(t, u.Call.Response.Usage.InputTokens+u.Call.Response.Usage.OutputTokens, "the mock reports usage")
		require.NotNil(t, u.Call.CostUSD, "a persona call of a priced model has a cost")
		assert.InDelta(t, costPrice.Cost(u.Call.Response.Usage), *u.Call.CostUSD, 1e-15)
		assert.Greater(t, *u.Call.CostUSD, 1e-9, "the persona alone spent past --max-cost")
		assert.False(t, u.Call.Unpriced())
		personaUSD += *u.Call.CostUSD
	}
	assert.Positive(t, personaUSD)

	// The agent's first call is answered: the persona's spend is not its.
	in, out := usageCall(t, dialects.NameChat, f.slot.LocalURL, secret, false)
	require.Positive(t, in+out)
	<-f.recorded
	// Its own spend then ends it, so the limit was in force all along.
	status, body := refusal(t, callers[dialects.NameChat](f.slot.LocalURL, secret))
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, body, "(--max-cost 1e-09)")
	<-f.recorded
	turns, ok := limited.Turns()
	require.True(t, ok)
	require.Len(t, turns, 2)
	assert.Empty(t, turns[0].Limit)
	assert.Equal(t, trace.LimitCost, turns[1].Limit)
}

// A persona call of a model without a price keeps no cost and says its
// cost is unknown, as a harness turn does.
func TestPersonaCallOfAnUnpricedModelHasNoCost(t *testing.T) {
	f := dialectFixture(t, dialects.NameChat, mockUpstream(t), func(c *interception.Config) {
		c.Prices = prices.Table{"another-model": costPrice}
	})
	require.True(t, f.slot.SetTask(json.RawMessage(`{"id":"t","prompt":"What is 2+2?","user":{"persona":"You are a student. {{prompt}}"}}`)))
	status, body := sideCall(t, http.MethodPost, f.slot.LocalURL+"/user", f.slot.Secret, `{"messages":[{"role":"user","content":"What is 2+2?"},{"role":"assistant","content":"4"}]}`)
	require.Equal(t, http.StatusOK, status, body)
	side, _ := f.slot.Side()
	require.Len(t, side.Users, 1)
	call := side.Users[0].Call
	require.NotNil(t, call)
	assert.Nil(t, call.CostUSD)
	assert.True(t, call.Unpriced(), "its cost is unknown, not 0")
}
