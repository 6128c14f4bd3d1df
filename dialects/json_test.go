package dialects

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnquote(t *testing.T) {
	tests := []struct{ raw, want string }{
		{`""`, ""},
		{`"plain text"`, "plain text"},
		{`"tab\tand \"quote\""`, "tab\tand \"quote\""},
		{`"\u00e9t\u00e9"`, "été"},
		{`"été"`, "été"},
		{"\"bad \xff utf8\"", "bad \uFFFD utf8"},
	}
	for _, tt := range tests {
		got, err := unquote([]byte(tt.raw))
		require.NoError(t, err, "unquote(%q)", tt.raw)
		assert.Equal(t, tt.want, got, "unquote(%q)", tt.raw)
	}
}
