package agent

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDoneIn(t *testing.T) {
	for _, tt := range []struct {
		reply, text string
		done        bool
	}{
		{"Now add 10.\n", "Now add 10.", false},
		{"Thanks! [DONE]", "Thanks!", true},
		{"[DONE]", "", true},
		{"  \n", "", true},
	} {
		text, done := doneIn(tt.reply)
		assert.Equal(t, tt.text, text, "doneIn(%q)", tt.reply)
		assert.Equal(t, tt.done, done, "doneIn(%q)", tt.reply)
	}
}

func TestModelToolName(t *testing.T) {
	assert.Equal(t, "counter__increment", modelToolName("counter", "increment"))
	assert.Equal(t, "fs__read_file_v2", modelToolName("fs", "read.file/v2"), "characters no dialect takes")
	assert.Len(t, modelToolName("server", string(make([]byte, 100))), 64, "at most 64")
}

func TestInputSchema(t *testing.T) {
	assert.Equal(t, map[string]any{"type": "object", "properties": map[string]any{}}, inputSchema(nil))
	got := inputSchema(map[string]any{"type": "object", "properties": map[string]any{"by": map[string]any{"type": "integer"}}, "required": []any{"by"}})
	assert.Equal(t, []any{"by"}, got["required"])
	assert.Contains(t, got["properties"], "by")
}

func TestCommandEnvHidesTheRolloutSecret(t *testing.T) {
	env := []string{"PATH=/bin", "OPENAI_API_KEY=s", "EVALFLOW_ROLLOUT_SECRET=s", "EVALFLOW_STATE_URL=http://x/state"}
	assert.Equal(t, []string{"PATH=/bin", "EVALFLOW_STATE_URL=http://x/state"}, commandEnv(env), "shell commands")
	assert.Equal(t, []string{"PATH=/bin", "EVALFLOW_ROLLOUT_SECRET=s", "EVALFLOW_STATE_URL=http://x/state"}, sideEnv(env), "tool servers and users")
}
