package interception

import (
	"net/http"
	"strconv"
	"strings"
)

// startedOn is a copy of the policy version the rollout was started on, or
// nil: each turn gets its own.
func (r Rollout) startedOn() *int64 {
	if r.PolicyVersion == nil {
		return nil
	}
	v := *r.PolicyVersion
	return &v
}

// answeredBy records on the turn the policy version the upstream says
// answered it, in the rollout's PolicyVersionHeader. A header that is not
// an integer is ignored (the turn keeps the version the rollout was
// started on) and logged, since every call of the run would meet it.
func (c *recorder) answeredBy(h http.Header) {
	name := c.e.rollout.PolicyVersionHeader
	if name == "" {
		return
	}
	raw := h.Get(name)
	if raw == "" {
		return
	}
	v, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
	if err != nil {
		// The value is not logged: only its name says what the header is.
		c.srv.cfg.Logger.Warn("policy version header is not an integer; keeping the announced version",
			"rollout", c.e.rollout.Key, "header", name)
		return
	}
	c.turn.PolicyVersion = &v
}
