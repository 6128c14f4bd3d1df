package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

// pullCall sends one call to the pull API with a plain net/http client.
func pullCall(ctx context.Context, method, url, token, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// TestTrainPullServesTheAPI runs `starter train --pull --pull-addr` as a
// user would, on its embedded server and worker, and pulls through HTTP.
func TestTrainPullServesTheAPI(t *testing.T) {
	const token = "train-pull-token-42"
	t.Setenv("EVALFLOW_PULL_TOKEN", token)
	dir := t.TempDir()
	script := filepath.Join(dir, "answer.sh")
	require.NoError(t, os.WriteFile(script, []byte(`echo 7 > "$EVALFLOW_ANSWER_FILE"`+"\n"), 0o600))
	pullAddr := devtest.FreeAddr(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		app := newApp()
		app.Writer, app.ErrWriter = io.Discard, io.Discard
		done <- app.RunContext(ctx, []string{"starter", "train", "--pull", "--run-id", "served", "--tasks", "4",
			"--epochs", "0", "--harness", "sh " + script, "--pull-addr", pullAddr,
			"--address", devtest.FreeAddr(t), "--embedded", "--ui-port", "-1", "--data-dir", filepath.Join(dir, "data"),
			"--runs-dir", filepath.Join(dir, "runs")})
	}()
	base := "http://" + pullAddr + "/v1/pull/served/"
	var pr workflows.PullProgress
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		select {
		case err := <-done:
			require.FailNow(c, fmt.Sprintf("starter train ended: %v", err))
		default:
		}
		status, body, err := pullCall(ctx, "GET", base+"progress", token, "")
		require.NoError(c, err)
		require.Equal(c, http.StatusOK, status, "%s", body)
		require.NoError(c, json.Unmarshal(body, &pr))
		assert.Equal(c, int64(4), pr.Tasks, "the run knows its taskset")
	}, 2*time.Minute, 50*time.Millisecond, "the pull API answers")

	status, body, err := pullCall(ctx, "POST", base+"sample", "wrong", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, status, "%s", body)

	status, body, err = pullCall(ctx, "POST", base+"sample", token, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var ref workflows.TaskRef
	require.NoError(t, json.Unmarshal(body, &ref))
	require.Equal(t, "served", ref.RunID)

	status, body, err = pullCall(ctx, "POST", base+"run_group", token, fmt.Sprintf(`{"position": %d, "n": 2}`, ref.Position))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var group workflows.GroupResult
	require.NoError(t, json.Unmarshal(body, &group))
	require.Len(t, group.Rollouts, 2)
	for _, s := range group.Rollouts {
		require.Equal(t, rollout.StatusOK, s.Status, "%+v", s)
	}

	status, body, err = pullCall(ctx, "POST", base+"close", token, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "%s", body)

	cancel()
	require.NoError(t, <-done, "Ctrl-C stops the process cleanly")
}

func TestPullServingNeedsAToken(t *testing.T) {
	t.Setenv("EVALFLOW_PULL_TOKEN", "")
	for _, args := range [][]string{
		{"pull-serve", "--address", "127.0.0.1:1"},
		{"train", "--pull", "--pull-addr", "127.0.0.1:0", "--address", "127.0.0.1:1"},
	} {
		app := newApp()
		app.Writer, app.ErrWriter = io.Discard, io.Discard
		err := app.Run(append([]string{"starter"}, args...))
		require.ErrorContains(t, err, "the pull API needs a token: set EVALFLOW_PULL_TOKEN", "starter %q", args)
	}
	app := newApp()
	app.Writer, app.ErrWriter = io.Discard, io.Discard
	err := app.Run([]string{"starter", "train", "--pull-addr", "127.0.0.1:0", "--address", "127.0.0.1:1"})
	require.ErrorContains(t, err, "--pull-addr serves a pull run: add --pull")
}

// A dry run prints the run's settings, never the pull API's token.
func TestDryRunHidesThePullToken(t *testing.T) {
	const token = "dry-run-pull-token-0001"
	t.Setenv("EVALFLOW_PULL_TOKEN", token)
	t.Chdir(t.TempDir())
	var out bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &out
	err := app.Run([]string{"starter", "train", "--pull", "--pull-addr", "127.0.0.1:8790", "--dry-run"})
	require.ErrorIs(t, err, exitCode(0))
	require.Contains(t, out.String(), "pull-addr: 127.0.0.1:8790")
	require.Contains(t, out.String(), "pull-token:", "the token is listed, blank")
	require.NotContains(t, out.String(), token)
}
