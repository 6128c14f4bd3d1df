package activities

// OpenLeases is how many rollout attempts a still holds, for tests.
func OpenLeases(a *Activities) int {
	a.leases.mu.Lock()
	defer a.leases.mu.Unlock()
	return len(a.leases.m)
}
