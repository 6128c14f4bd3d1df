package main

import (
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/internal/viewer"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/results/storetest"
)

func TestServeViewerOnLoopback(t *testing.T) {
	dir := t.TempDir()
	store := storetest.Files(t, dir)
	require.NoError(t, store.WriteSummary(context.Background(), "run-1", map[string]string{"model": "m"}))

	srv, err := serveViewer(context.Background(), wiring.StoreConfig{RunsDir: dir}, "127.0.0.1:0", viewer.Options{})
	require.NoError(t, err)
	defer srv.stop()
	assert.True(t, strings.HasPrefix(srv.url, "http://127.0.0.1:"), srv.url)

	resp, err := http.Get(srv.url + "api/runs")
	require.NoError(t, err)
	defer resp.Body.Close()
	var rows []viewer.RunRow
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&rows))
	require.Len(t, rows, 1)
	assert.Equal(t, "run-1", rows[0].ID)
	assert.Equal(t, "m", rows[0].Model)
}

func TestViewerIsToldTheEnvironmentsSecrets(t *testing.T) {
	t.Setenv("MY_PROVIDER_API_KEY", "key-0123456789")
	t.Setenv("GH_TOKEN", "tok-0123456789")
	t.Setenv("EVALFLOW_TASKS", "not-a-secret-value")
	set := flag.NewFlagSet("t", flag.ContinueOnError)
	set.String(wiring.FlagNamespace, "ns", "")
	opts := viewerOptions(cli.NewContext(cli.NewApp(), set, nil), "http://ui:8233")
	assert.Contains(t, opts.Secrets, "key-0123456789")
	assert.Contains(t, opts.Secrets, "tok-0123456789")
	assert.NotContains(t, opts.Secrets, "not-a-secret-value")
	assert.Equal(t, "ns", opts.Namespace)
	assert.Equal(t, "http://ui:8233", opts.TemporalUI)
}
