package viewer_test

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/evalflow/evalflow/internal/viewer/viewertest"
	"github.com/evalflow/evalflow/rollout"
)

// TestBrowser drives the viewer in a real Chromium over the fixture's runs:
// the runs list shows them, a failed rollout is marked failed with its
// reason, a transcript shows a tool call, and the training run's plot has
// one point per epoch.
func TestBrowser(t *testing.T) {
	b := viewertest.New(t, "viewer")
	srv := serve(t)

	// The runs list.
	b.Open(srv.URL + "/")
	b.WaitVisible(`tr[data-run="` + evalRun + `"]`)
	evalRow, trainRow := b.Text(`tr[data-run="`+evalRun+`"]`), b.Text(`tr[data-run="`+trainRun+`"]`)
	b.Shot("runs.png")
	for _, want := range []string{"eval", "finished", "mock-1", "arith", "12", "8", "4"} {
		assert.Contains(t, evalRow, want)
	}
	assert.Equal(t, "$0.0050 + unknown", b.Text(`tr[data-run="`+evalRun+`"] td.cost`), "the runs list shows each run's cost")
	assert.Contains(t, trainRow, "train")
	assert.Contains(t, trainRow, "running")

	// A run: its figures, and its failed rollouts found through the error kinds.
	failedKey := rollout.Key(evalRun, 0, 4, 0)
	b.GoTo("#/run/" + evalRun)
	b.WaitVisible(`#rollouts-table tbody tr`)
	assert.Equal(t, 10, b.Count(`#reward-histogram rect.bin`))
	cost := b.Text(`#run-cost`)
	assert.Contains(t, cost, "$0.0050", "the run's cost sums its priced rollouts")
	assert.Contains(t, cost, "unknown for 2 rollouts")
	assert.Contains(t, b.Text(`tr[data-key="`+rollout.Key(evalRun, 0, 0, 0)+`"] td.cost`), "$0.0005")
	assert.Equal(t, "unknown", b.Text(`tr[data-key="`+rollout.Key(evalRun, 0, 5, 0)+`"] td.cost`))
	b.Shot("run.png")
	b.Click(`#error-kinds a`) // the most frequent kind first: harness_exit
	b.WaitVisible(`#rollouts-table[data-total="2"] tr.rollout-row.error[data-key="` + failedKey + `"]`)
	assert.Equal(t, 2, b.Count(`#rollouts-table tbody tr`), "the filter keeps the two harness exits")
	assert.Contains(t, b.Text(`#page-info`), "of 2")
	failedRow := b.Text(`tr[data-key="` + failedKey + `"]`)
	assert.Contains(t, failedRow, "failed")
	assert.Contains(t, failedRow, "harness_exit: harness exited with code 3")
	b.Shot("run-failed.png")

	// A rollout: both attempts, the transcript with its tool call.
	retried := rollout.Key(evalRun, 0, 2, 0)
	b.GoTo("#/rollout/" + url.PathEscape(evalRun) + "/" + url.PathEscape(retried))
	b.WaitVisible(`details.attempt[open] .tool-call[data-tool="calculator"]`)
	assert.Equal(t, 2, b.Count(`details.attempt`), "the failed first attempt is shown too")
	assert.Equal(t, 2, b.Count(`details.attempt[open] .turn`))
	call := b.Text(`details.attempt[open] .tool-call[data-tool="calculator"]`)
	assert.Contains(t, call, "calculator")
	assert.Contains(t, call, `"expression": "17*23"`)
	assert.Contains(t, b.Text(`details.attempt[data-attempt="1"] > summary`), "failed")
	assert.Contains(t, b.Text(`details.attempt[open] .turn[data-turn="0"] .head`), "provider default (fell back from primary)",
		"the turn names the provider that answered and the one it fell back from")
	assert.NotContains(t, b.Text(`details.attempt[open] .turn[data-turn="1"] .head`), "provider", "a turn naming no provider shows none")
	assert.Equal(t, "$0.0005", b.Text(`#rollout-cost`))
	assert.Contains(t, b.Text(`details.attempt[open] .turn[data-turn="0"] .head`), "$0.0001", "a turn shows its cost")
	assert.Equal(t, 2, b.Count(`details.attempt[open] .steps tr.step`), "a multi-step task's steps, each a row")
	assert.Contains(t, b.Text(`details.attempt[open] .steps tr.step[data-step="scaffold"]`), "gate only")
	assert.Contains(t, b.Text(`details.attempt[open] ul.notes`), "storage_mb is not honoured", "what the task asked and was not carried out")
	b.Shot("rollout.png")

	// A failed rollout's page says why, and shows no secret.
	b.GoTo("#/rollout/" + url.PathEscape(evalRun) + "/" + url.PathEscape(failedKey))
	b.WaitVisible(`#rollout-error`)
	assert.Contains(t, b.Text(`#rollout-error`), "harness_exit: harness exited with code 3")
	assert.Equal(t, "3", b.Text(`details.attempt[open] .exit-code`))
	html := b.HTML()
	assert.Contains(t, html, "Traceback: boom")
	assert.NotContains(t, html, providerKey)
	assert.NotContains(t, html, plantedKey)
	b.Shot("rollout-failed.png")

	// A training run: one point per epoch.
	b.GoTo("#/run/" + trainRun)
	b.WaitVisible(`#epoch-plot circle.epoch-point`)
	assert.Equal(t, 3, b.Count(`#epoch-plot circle.epoch-point`))
	b.Shot("train.png")
}

// TestBrowserShowsArtifacts: a rollout's page shows what its attempt left
// in /logs/artifacts: a picture drawn, text and JSON in a <pre>, a binary
// file and one too large to keep by name and size; no secret they held.
func TestBrowserShowsArtifacts(t *testing.T) {
	b := viewertest.New(t, "viewer-artifacts")
	srv := serve(t)
	key := rollout.Key(evalRun, 0, 2, 0)
	b.Open(srv.URL + "/#/rollout/" + url.PathEscape(evalRun) + "/" + url.PathEscape(key))
	at := func(path string) string { return `details.attempt[open] .artifact[data-path="` + path + `"]` }
	b.WaitVisible(at("charts/plot.png") + ` img.artifact-image[data-loaded]`)
	assert.Equal(t, 5, b.Count(`details.attempt[open] .artifact`))
	assert.Equal(t, 0, b.Count(`details.attempt:not([open]) .artifact`), "the failed first attempt left none")

	assert.Contains(t, b.Text(at("report.txt")+" pre"), "all checks passed")
	assert.Contains(t, b.Text(at("report.txt")+" pre"), "OPENAI_API_KEY=[redacted]")
	assert.Contains(t, b.Text(at("result.json")+" pre"), `"passed": 3`, "JSON is shown indented")
	for path, size := range map[string]string{"blob.bin": "31 B", "huge.bin": "9.0 MiB"} {
		assert.Equal(t, 1, b.Count(at(path)+`[data-kind="file"]`), path)
		assert.Equal(t, 0, b.Count(at(path)+" pre, "+at(path)+" img"), "%s is shown by name only", path)
		assert.Contains(t, b.Text(at(path)), size, path)
	}
	assert.Contains(t, b.Text(at("huge.bin")), "content not kept")
	b.Shot("artifacts.png")

	html := b.HTML()
	assert.NotContains(t, html, plantedKey)
	assert.NotContains(t, html, providerKey)
}
