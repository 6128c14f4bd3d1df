package viewer_test

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/rollout"
)

// chromium is the browser the test drives: Debian's package `chromium`, or
// the binary EVALFLOW_CHROMIUM names.
func chromium(t *testing.T) string {
	t.Helper()
	path := os.Getenv("EVALFLOW_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	_, err := os.Stat(path)
	require.NoError(t, err, "the viewer's browser test needs Chromium at %s: install Debian's package `chromium` (apt-get install chromium) or set EVALFLOW_CHROMIUM", path)
	return path
}

// artifacts is where screenshots go: $EVALFLOW_ARTIFACTS, else a temporary
// directory named in the log.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("EVALFLOW_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	dir = filepath.Join(dir, "viewer")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Logf("screenshots in %s", dir)
	return dir
}

// TestBrowser drives the viewer in a real Chromium over the fixture's runs:
// the runs list shows them, a failed rollout is marked failed with its
// reason, a transcript shows a tool call, and the training run's plot has
// one point per epoch.
func TestBrowser(t *testing.T) {
	exec := chromium(t)
	out := artifacts(t)
	srv := serve(t)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exec),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()

	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx, steps...))
	}
	visible := func(sel string) chromedp.Action[chromedp.Void] { return chromedp.WaitVisible(chromedp.CSS(sel)) }
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err, "text of %s", sel)
		return s
	}
	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+jsString(sel)+`).length`))
		require.NoError(t, err, "count %s", sel)
		return n
	}
	goTo := func(hash string) {
		t.Helper()
		_, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash = `+jsString(hash)))
		require.NoError(t, err, "go to %s", hash)
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100 is a PNG
		require.NoError(t, err, "screenshot %s", name)
		require.NoError(t, os.WriteFile(filepath.Join(out, name), png, 0o644))
	}

	// The runs list.
	do(chromedp.Navigate(srv.URL+"/"), visible(`tr[data-run="`+evalRun+`"]`))
	evalRow, trainRow := text(`tr[data-run="`+evalRun+`"]`), text(`tr[data-run="`+trainRun+`"]`)
	shot("runs.png")
	for _, want := range []string{"eval", "finished", "mock-1", "arith", "12", "8", "4"} {
		assert.Contains(t, evalRow, want)
	}
	assert.Contains(t, trainRow, "train")
	assert.Contains(t, trainRow, "running")

	// A run: its figures, and its failed rollouts found through the error kinds.
	failedKey := rollout.Key(evalRun, 0, 4, 0)
	goTo("#/run/" + evalRun)
	do(visible(`#rollouts-table tbody tr`))
	assert.Equal(t, 10, count(`#reward-histogram rect.bin`))
	shot("run.png")
	do(chromedp.Click(chromedp.CSS(`#error-kinds a`)), // the most frequent kind first: harness_exit
		visible(`#rollouts-table[data-total="2"] tr.rollout-row.error[data-key="`+failedKey+`"]`))
	assert.Equal(t, 2, count(`#rollouts-table tbody tr`), "the filter keeps the two harness exits")
	assert.Contains(t, text(`#page-info`), "of 2")
	failedRow := text(`tr[data-key="` + failedKey + `"]`)
	assert.Contains(t, failedRow, "failed")
	assert.Contains(t, failedRow, "harness_exit: harness exited with code 3")
	shot("run-failed.png")

	// A rollout: both attempts, the transcript with its tool call.
	retried := rollout.Key(evalRun, 0, 2, 0)
	goTo("#/rollout/" + url.PathEscape(evalRun) + "/" + url.PathEscape(retried))
	do(visible(`details.attempt[open] .tool-call[data-tool="calculator"]`))
	assert.Equal(t, 2, count(`details.attempt`), "the failed first attempt is shown too")
	assert.Equal(t, 2, count(`details.attempt[open] .turn`))
	call := text(`details.attempt[open] .tool-call[data-tool="calculator"]`)
	assert.Contains(t, call, "calculator")
	assert.Contains(t, call, `"expression": "17*23"`)
	assert.Contains(t, text(`details.attempt[data-attempt="1"] > summary`), "failed")
	shot("rollout.png")

	// A failed rollout's page says why, and shows no secret.
	goTo("#/rollout/" + url.PathEscape(evalRun) + "/" + url.PathEscape(failedKey))
	do(visible(`#rollout-error`))
	assert.Contains(t, text(`#rollout-error`), "harness_exit: harness exited with code 3")
	assert.Equal(t, "3", text(`details.attempt[open] .exit-code`))
	html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS(`html`)))
	require.NoError(t, err)
	assert.Contains(t, html, "Traceback: boom")
	assert.NotContains(t, html, providerKey)
	assert.NotContains(t, html, plantedKey)
	shot("rollout-failed.png")

	// A training run: one point per epoch.
	goTo("#/run/" + trainRun)
	do(visible(`#epoch-plot circle.epoch-point`))
	assert.Equal(t, 3, count(`#epoch-plot circle.epoch-point`))
	shot("train.png")
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
