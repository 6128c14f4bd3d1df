package results_test

import (
	"testing"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/storetest"
)

func TestFilesContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) results.Store {
		s := storetest.Files(t, "")
		return s
	})
}
