package harness

// Remote is a Runtime whose harnesses do not share this host's loopback:
// they reach the interception server only through a tunnel.
type Remote interface {
	Runtime
	// Remote reports whether harnesses run off this host's loopback.
	Remote() bool
}

// IsRemote reports whether r's harnesses need a tunnel to reach this host.
func IsRemote(r Runtime) bool {
	rr, ok := r.(Remote)
	return ok && rr.Remote()
}
