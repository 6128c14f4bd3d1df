package mock

import (
	"net/http"
	"strconv"
)

// SetPolicyVersion makes v the policy version the model says answered each
// call from now on, in the response header Config.PolicyVersionHeader
// names: as a trainer's inference server does once it loads new weights.
// Before any, or without the header's name, no version is sent.
func (m *Model) SetPolicyVersion(v int64) {
	m.policy.Store(&v)
}

// policyHeader sets the policy version header on an answer.
func (m *Model) policyHeader(h http.Header) {
	if m.cfg.PolicyVersionHeader == "" {
		return
	}
	if v := m.policy.Load(); v != nil {
		h.Set(m.cfg.PolicyVersionHeader, strconv.FormatInt(*v, 10))
	}
}
