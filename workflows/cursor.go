package workflows

// Cursor maps run positions to (epoch, task index) deterministically.
//
// For a finite taskset of n tasks, position p is epoch p/n and index
// perm(seed, epoch)[p%n], where perm is a Fisher-Yates shuffle driven by the
// PRNG below (or the identity without shuffle). For an infinite taskset the
// index is p and the epoch is 0. The PRNG is part of the history format: a
// replaying workflow must draw the same permutation, so it lives here rather
// than in math/rand, whose algorithms may change between Go releases.
type Cursor struct {
	// Len is the taskset size, or -1 for an infinite taskset.
	Len     int64
	Seed    uint64
	Shuffle bool

	permEpoch int
	perm      []int64
}

// NewCursor returns a cursor over a taskset of n tasks (-1: infinite).
func NewCursor(n int64, seed uint64, shuffle bool) *Cursor {
	return &Cursor{Len: n, Seed: seed, Shuffle: shuffle && n > 0, permEpoch: -1}
}

// At returns the epoch and task index at position p.
func (c *Cursor) At(p int64) (epoch int, index int64) {
	if c.Len < 0 {
		return 0, p
	}
	epoch = int(p / c.Len)
	i := p % c.Len
	if !c.Shuffle {
		return epoch, i
	}
	if c.perm == nil || c.permEpoch != epoch {
		c.perm = Permutation(c.Len, c.Seed, epoch)
		c.permEpoch = epoch
	}
	return epoch, c.perm[i]
}

// Permutation is the shuffled order of n tasks for (seed, epoch).
func Permutation(n int64, seed uint64, epoch int) []int64 {
	perm := make([]int64, n)
	for i := range perm {
		perm[i] = int64(i)
	}
	r := newRNG(seed, uint64(epoch))
	for i := n - 1; i > 0; i-- {
		j := int64(r.below(uint64(i + 1)))
		perm[i], perm[j] = perm[j], perm[i]
	}
	return perm
}

// rng is splitmix64: tiny, fast, and fixed forever.
type rng struct{ state uint64 }

func newRNG(seed, stream uint64) *rng {
	r := &rng{state: seed ^ (stream+1)*0x9e3779b97f4a7c15}
	r.next()
	return r
}

func (r *rng) next() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// below returns a uniform value in [0, n) without modulo bias.
func (r *rng) below(n uint64) uint64 {
	limit := -n % n // 2^64 mod n
	for {
		v := r.next()
		if v >= limit {
			return v % n
		}
	}
}

// Take maps position p of a run that takes perEpoch tasks from each epoch
// (perEpoch <= Len for a finite taskset): epoch p/perEpoch, and the
// (p%perEpoch)-th task of that epoch's order. On an infinite taskset epochs
// are perEpoch consecutive indexes, so no task repeats.
func (c *Cursor) Take(p, perEpoch int64) (epoch int, index int64) {
	if c.Len < 0 {
		return int(p / perEpoch), p
	}
	e := p / perEpoch
	return c.At(e*c.Len + p%perEpoch)
}
