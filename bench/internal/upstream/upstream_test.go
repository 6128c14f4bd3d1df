package upstream_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/evalflow/evalflow/bench/internal/upstream"
)

// TestMarkerRoundTrip checks the marker parser against its writer.
func TestMarkerRoundTrip(t *testing.T) {
	now := time.Unix(1700000000, 123456789)
	tests := []struct {
		in   []byte
		seq  int
		sent time.Time
		ok   bool
	}{
		{in: upstream.AppendMarker([]byte(`data: {"x":"`), 7, now), seq: 7, sent: now, ok: true},
		{in: []byte("data: nothing"), ok: false},
		{in: []byte("@@7@@"), ok: false},
	}
	for _, tt := range tests {
		seq, sent, ok := upstream.Marker(tt.in)
		assert.Equal(t, tt.ok, ok, "Marker(%q) ok", tt.in)
		if ok {
			assert.Equal(t, tt.seq, seq, "Marker(%q) seq", tt.in)
			assert.True(t, tt.sent.Equal(sent), "Marker(%q) = %v, want %v", tt.in, sent, tt.sent)
		}
	}
}
