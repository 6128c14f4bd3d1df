package providers_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/trace"
)

// A Client is what an interception server relays to: renaming one of the
// methods interception.Upstream names fails here, not at run time.
var _ interception.Upstream = (*providers.Client)(nil)

// The kinds a FailureError names are the ones a turn records: the
// interception server passes them on as they are.
func TestFailureKindsAreTraceKinds(t *testing.T) {
	for kind, want := range map[string]trace.UpstreamFailure{
		providers.FailureConnection: trace.UpstreamConnection,
		providers.FailureTimeout:    trace.UpstreamTimeout,
		providers.FailureTruncated:  trace.UpstreamTruncated,
		providers.FailureBadAnswer:  trace.UpstreamBadAnswer,
	} {
		assert.Equal(t, string(want), kind)
	}
}
