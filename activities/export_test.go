package activities

// OpenLeases is how many rollout attempts a still holds, for tests.
func OpenLeases(a *Activities) int {
	a.leases.mu.Lock()
	defer a.leases.mu.Unlock()
	return len(a.leases.m)
}

// StartRun does what a's Run of key does first: the rollout's unit counts
// as running, so that a holding Acquire returns.
func StartRun(a *Activities, key string) { a.lease(key).start() }
