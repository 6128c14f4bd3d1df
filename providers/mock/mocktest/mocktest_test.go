package mocktest_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/providers/mock/mocktest"
)

func TestServeAnswersAtItsBaseURL(t *testing.T) {
	_, url := mocktest.Serve(t, mock.Config{Model: "mock-test"})
	resp, err := http.Get(url + "/models")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "GET %s/models", url)
}
