package harness

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTail(t *testing.T) {
	tests := []struct {
		name   string
		limit  int
		writes []string
		want   string
	}{
		{"nothing", 4, nil, ""},
		{"under limit", 8, []string{"ab", "cd"}, "abcd"},
		{"exactly limit", 4, []string{"ab", "cd"}, "abcd"},
		{"wraps", 4, []string{"abc", "def"}, "cdef"},
		{"wraps many times", 3, []string{"a", "b", "c", "d", "e", "f", "g"}, "efg"},
		{"one big write", 4, []string{"0123456789"}, "6789"},
		{"big write after small", 4, []string{"xy", "0123456789", "z"}, "789z"},
		{"whole rune kept", 4, []string{"aé", "bc"}, "ébc"},
		{"cut rune dropped", 4, []string{"aé", "bcd"}, "bcd"},
	}
	for _, tt := range tests {
		tl := newTail(tt.limit)
		for _, w := range tt.writes {
			n, err := tl.Write([]byte(w))
			assert.NoError(t, err)
			assert.Equal(t, len(w), n)
		}
		assert.Equal(t, tt.want, tl.String(), "%s: writes %q with limit %d", tt.name, tt.writes, tt.limit)
	}
}

func TestTailDefaultLimit(t *testing.T) {
	tl := newTail(0)
	_, _ = tl.Write([]byte(strings.Repeat("x", 3*DefaultOutputLimit)))
	assert.Len(t, tl.String(), DefaultOutputLimit)
}
