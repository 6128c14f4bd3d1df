package postgres_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/postgres"
	"github.com/evalflow/evalflow/results/postgres/pgtest"
	"github.com/evalflow/evalflow/results/storetest"
)

func open(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, postgres.Options{})
	require.NoError(t, err)
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) results.Store { return open(t, pgtest.URL(t)) })
}
