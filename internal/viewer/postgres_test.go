package viewer_test

import (
	"context"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/results/postgres/pgtest"
	"github.com/evalflow/evalflow/internal/viewer"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/postgres"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/rollout"
)

// The viewer over the PostgreSQL store serves what it serves over files:
// the same runs, rollouts and attempts, from the same writes.
func TestPostgresStoreServesTheSameRuns(t *testing.T) {
	files := storetest.Files(t, "")
	db, err := postgres.Open(context.Background(), pgtest.URL(t), postgres.Options{})
	require.NoError(t, err)
	defer db.Close()
	servers := map[string]*httptest.Server{}
	for name, store := range map[string]results.Store{"files": files, "postgres": db} {
		writeFixture(t, store)
		srv := httptest.NewServer(viewer.New(store, viewer.Options{Secrets: []string{providerKey}}))
		t.Cleanup(srv.Close)
		servers[name] = srv
	}

	var fromFiles, fromDB []viewer.RunRow
	getJSON(t, servers["files"], "/api/runs", &fromFiles)
	getJSON(t, servers["postgres"], "/api/runs", &fromDB)
	require.Len(t, fromDB, 2)
	for i := range fromDB {
		assert.False(t, fromDB[i].UpdatedAt.IsZero(), "the database says when %s changed", fromDB[i].ID)
		fromFiles[i].UpdatedAt = fromDB[i].UpdatedAt
	}
	assert.Equal(t, fromFiles, fromDB)

	for _, path := range []string{
		"/api/runs/" + evalRun,
		"/api/runs/" + evalRun + "/rollouts?status=error&sort=-reward",
		"/api/runs/" + trainRun,
		"/api/runs/" + evalRun + "/rollout?key=" + url.QueryEscape(rollout.Key(evalRun, 0, 4, 0)),
	} {
		var a, b map[string]any
		getJSON(t, servers["files"], path, &a)
		getJSON(t, servers["postgres"], path, &b)
		delete(a, "updated_at")
		delete(b, "updated_at") // when each store took the writes
		assert.Equal(t, a, b, "GET %s", path)
		assert.NotEmpty(t, b, "GET %s", path)
	}
	status, _ := get(t, servers["postgres"], "/api/runs/no%20such%20run")
	assert.Equal(t, 404, status)
}
