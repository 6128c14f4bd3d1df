package arith

// rng is splitmix64. It lives here rather than coming from math/rand so that
// generated tasks can never change under a Go upgrade: task i of a seed is the
// same on every worker, today and after a replay.
type rng struct{ state uint64 }

const golden = 0x9E3779B97F4A7C15

// newRNG returns a generator for stream i of seed.
func newRNG(seed, i uint64) *rng {
	return &rng{state: mix(seed^golden) ^ mix(i)}
}

func (r *rng) next() uint64 {
	r.state += golden
	return mix(r.state)
}

// intn returns a value in [0, n). The modulo bias is negligible for the
// small n used here.
func (r *rng) intn(n int) int {
	return int(r.next() % uint64(n))
}

// between returns a value in [lo, hi].
func (r *rng) between(lo, hi int) int {
	return lo + r.intn(hi-lo+1)
}

func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}
