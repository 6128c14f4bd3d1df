package jsonwire

import "encoding/binary"

// The scans that every string of a document goes through, eight bytes to
// a word and four words at a time: a byte below 0x20 has (w - 0x20) borrow
// into its top bit while its own top bit is clear, and a byte from 0x80
// has its top bit set. Loading each 32-byte window through one slice of
// known length lets the compiler drop the bounds checks, which doubles
// the speed over two words a step.
const (
	lows  = 0x0101010101010101
	highs = 0x8080808080808080
)

// printableASCII is the length of s's leading run of whole 32-byte
// windows that hold only bytes from 0x20 to 0x7f: what needs no check for
// UTF-8 or control bytes.
func printableASCII(s []byte) int {
	i := 0
	for ; len(s)-i >= 32; i += 32 {
		w := s[i : i+32 : i+32]
		a, b := binary.LittleEndian.Uint64(w), binary.LittleEndian.Uint64(w[8:])
		c, d := binary.LittleEndian.Uint64(w[16:]), binary.LittleEndian.Uint64(w[24:])
		if (below(a)|below(b)|below(c)|below(d)|a|b|c|d)&highs != 0 {
			break
		}
	}
	return i
}

// indexControl is the index of the first byte below 0x20 in s, or -1.
func indexControl(s []byte) int {
	i := 0
	for ; len(s)-i >= 32; i += 32 {
		w := s[i : i+32 : i+32]
		a, b := binary.LittleEndian.Uint64(w), binary.LittleEndian.Uint64(w[8:])
		c, d := binary.LittleEndian.Uint64(w[16:]), binary.LittleEndian.Uint64(w[24:])
		if (below(a)|below(b)|below(c)|below(d))&highs != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if s[i] < 0x20 {
			return i
		}
	}
	return -1
}

// below has a top bit set if and only if a byte of w is below 0x20: such
// a byte's subtraction borrows into its top bit while its own is clear. A
// borrow starts only at such a byte, so the bytes above it that it reaches
// cannot make a word without one test positive.
func below(w uint64) uint64 { return (w - 0x20*lows) &^ w }
