package sidecar

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRenderPersona(t *testing.T) {
	conv := []personaMessage{{"user", "what is 2+2?"}, {"assistant", "4"}}
	assert.Equal(t, "Student asking: what is 2+2?\n---\nuser: what is 2+2?\n\nassistant: 4\n---",
		renderPersona("Student asking: {{prompt}}\n---\n{{conversation}}\n---", "what is 2+2?", conv))
	assert.Equal(t, "Be terse.\n\nuser: what is 2+2?\n\nassistant: 4", renderPersona("Be terse.", "x", conv),
		"a template without the conversation gets it after")
}
