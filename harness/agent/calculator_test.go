package agent

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRunTool(t *testing.T) {
	tests := []struct {
		name, args, want string
	}{
		{"calculator", `{"expression":"37 * (12 + 5)"}`, "629"},
		{"calculator", `{"expression":"1 / 4"}`, "0.25"},
		{"calculator", `{"expression":"1 / 0"}`, "error: division by zero"},
		{"calculator", `{"expression":"rm -rf /"}`, "error: unexpected character"},
		{"calculator", `not json`, "error: arguments are not valid JSON"},
		{"shell", `{}`, `error: unknown tool "shell"`},
	}
	for _, tt := range tests {
		got := runTool(tt.name, tt.args)
		assert.Contains(t, got, tt.want, "runTool(%q, %q) = %q, want %q", tt.name, tt.args, got, tt.want)
	}
}
