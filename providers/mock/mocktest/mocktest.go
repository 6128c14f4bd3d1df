// Package mocktest serves the offline mock model (providers/mock) to a
// test, as the upstream an interception server or a harness calls.
package mocktest

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/providers/mock"
)

// Serve serves the mock model cfg makes over HTTP until the test ends. It
// returns the model and its base URL (…/v1), as providers take it.
func Serve(tb testing.TB, cfg mock.Config) (model *mock.Model, baseURL string) {
	tb.Helper()
	m, err := mock.New(cfg)
	require.NoError(tb, err)
	srv := httptest.NewServer(m)
	tb.Cleanup(srv.Close)
	return m, srv.URL + "/v1"
}
