package jsonwire

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every byte value at every place of three windows, after a run of
// printable ASCII and before one: the word-at-a-time scans agree with a
// byte-by-byte reading.
func TestScansAgreeWithReadingByteByByte(t *testing.T) {
	for n := 0; n < 96; n++ {
		for v := range 256 {
			s := []byte(strings.Repeat("a", n) + string([]byte{byte(v)}) + strings.Repeat("b", 40))
			wantCtl := -1
			if v < 0x20 {
				wantCtl = n
			}
			require.Equal(t, wantCtl, indexControl(s), "byte %#x at %d", v, n)
			plain := printableASCII(s)
			require.Zero(t, plain%32)
			require.LessOrEqual(t, plain, len(s))
			if v < 0x20 || v >= 0x80 {
				require.LessOrEqual(t, plain, n, "byte %#x at %d passed over", v, n)
			} else {
				require.Equal(t, len(s)/32*32, plain, "byte %#x at %d", v, n)
			}
		}
	}
}

// A control byte after a borrow-prone neighbour is found at its own place,
// and a string of only 0x20s and high bytes holds none.
func TestIndexControlAroundBorrows(t *testing.T) {
	s := bytes.Repeat([]byte{0x20, 0xa0, 0xff, 0x80}, 16)
	require.Equal(t, -1, indexControl(s))
	s[37] = 0x1f
	require.Equal(t, 37, indexControl(s))
	s[36] = 0x00
	require.Equal(t, 36, indexControl(s))
}
