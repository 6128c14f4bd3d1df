package interception

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/providers"
)

// providers.Client asks /tokenize at its server's root: renaming
// RelayRoot fails here, not by sending token-in calls as text.
var _ rootUpstream = (*providers.Client)(nil)

// Messages that a chat template renders alike have one key, whatever
// shape the caller gave their content; ones it renders differently do not.
func TestMessageKey(t *testing.T) {
	call := []dialects.ToolCall{{ID: "call_1", Name: "calculator", Arguments: `{"expression":"2+3"}`}}
	text := func(s ...string) []dialects.Part {
		var ps []dialects.Part
		for _, x := range s {
			ps = append(ps, dialects.Part{Type: dialects.PartText, Text: x})
		}
		return ps
	}
	base := dialects.Message{Role: dialects.RoleAssistant, ToolCalls: call}
	for _, same := range []dialects.Message{
		{Role: dialects.RoleAssistant, Content: text(""), ToolCalls: call},
		{Role: dialects.RoleAssistant, ToolCalls: call, Refusal: "", Reasoning: "thinking is not rendered back"},
	} {
		assert.Equal(t, messageKey(base), messageKey(same), "%+v", same)
	}
	assert.Equal(t, messageKey(dialects.Message{Role: "user", Content: text("ab")}),
		messageKey(dialects.Message{Role: "user", Content: text("a", "b")}), "text parts join")
	for _, other := range []dialects.Message{
		{Role: dialects.RoleAssistant, Content: text("x"), ToolCalls: call},
		{Role: dialects.RoleAssistant},
		{Role: "user", ToolCalls: call},
		{Role: dialects.RoleAssistant, ToolCalls: []dialects.ToolCall{{ID: "call_2", Name: "calculator", Arguments: `{"expression":"2+3"}`}}},
	} {
		assert.NotEqual(t, messageKey(base), messageKey(other), "%+v", other)
	}
}
