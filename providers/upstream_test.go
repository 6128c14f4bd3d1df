package providers_test

import (
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/providers"
)

// A Client is what an interception server relays to: renaming one of the
// methods interception.Upstream names fails here, not at run time.
var _ interception.Upstream = (*providers.Client)(nil)
