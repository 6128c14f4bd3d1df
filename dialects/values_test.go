package dialects

import (
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A content string shares the decoded field's bytes: parsing a long
// message allocates its text once, not twice.
func TestParsedContentIsOneCopy(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("y", 64<<10) + `"}]}`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	req, err := ParseChatRequest(body)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Len(t, req.Messages, 1)
	assert.Equal(t, strings.Repeat("y", 64<<10), req.Messages[0].Content[0].Text)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(2*64<<10), "parsing a 64 KB message allocated two copies of it or more")
}
