// Package viewertest drives the run viewer in a real browser for tests:
// Debian's Chromium, headless, through chromedp.
package viewertest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// Chromium is the browser the tests drive: Debian's package `chromium`, or
// the binary EVALFLOW_CHROMIUM names. A missing browser fails the test.
func Chromium(t testing.TB) string {
	t.Helper()
	path := os.Getenv("EVALFLOW_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	_, err := os.Stat(path)
	require.NoError(t, err, "the run viewer's browser test needs Chromium at %s: install Debian's package `chromium` (apt-get install chromium) or set EVALFLOW_CHROMIUM", path)
	return path
}

// Browser is one headless Chromium tab; its methods fail the test on error.
type Browser struct {
	t   testing.TB
	ctx context.Context
	// Shots is where Shot writes screenshots.
	Shots string
}

// New starts a headless Chromium with a fresh profile, stopped when the test
// ends. Screenshots go to $EVALFLOW_ARTIFACTS/<name>, else to a temporary
// directory named in the log.
func New(t testing.TB, name string) *Browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancel(); cancelTab(); cancelAlloc() })

	dir := os.Getenv("EVALFLOW_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	dir = filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Logf("screenshots in %s", dir)
	return &Browser{t: t, ctx: ctx, Shots: dir}
}

// Open loads url.
func (b *Browser) Open(url string) {
	b.t.Helper()
	require.NoError(b.t, chromedp.Do(b.ctx, chromedp.Navigate(url)), "open %s", url)
}

// GoTo moves the page to a fragment (#/run/...), as a click on a link does.
func (b *Browser) GoTo(hash string) {
	b.t.Helper()
	_, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.hash = `+quote(hash)))
	require.NoError(b.t, err, "go to %s", hash)
}

// WaitVisible waits until an element matching the CSS selector is visible.
func (b *Browser) WaitVisible(sel string) {
	b.t.Helper()
	require.NoError(b.t, chromedp.Do(b.ctx, chromedp.WaitVisible(chromedp.CSS(sel))), "wait for %s", sel)
}

// Click clicks the first element matching the CSS selector.
func (b *Browser) Click(sel string) {
	b.t.Helper()
	require.NoError(b.t, chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(sel))), "click %s", sel)
}

// Text is the visible text of the first element matching the CSS selector.
func (b *Browser) Text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(b.t, err, "text of %s", sel)
	return s
}

// Count is the number of elements matching the CSS selector.
func (b *Browser) Count(sel string) int {
	b.t.Helper()
	n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+quote(sel)+`).length`))
	require.NoError(b.t, err, "count %s", sel)
	return n
}

// HTML is the page's whole document as the browser holds it.
func (b *Browser) HTML() string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.OuterHTML(chromedp.CSS(`html`)))
	require.NoError(b.t, err, "page html")
	return s
}

// Shot writes a full-page PNG screenshot to Shots/name.
func (b *Browser) Shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100)) // quality 100 is a PNG
	require.NoError(b.t, err, "screenshot %s", name)
	require.NoError(b.t, os.WriteFile(filepath.Join(b.Shots, name), png, 0o644))
}

// quote is s as a JavaScript string literal.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
