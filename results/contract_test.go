package results_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/storetest"
)

func TestFilesContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) results.Store {
		s, err := results.Open(t.TempDir())
		require.NoError(t, err)
		return s
	})
}
