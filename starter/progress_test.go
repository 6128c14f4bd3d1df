package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/workflows"
)

func TestRenderProgress(t *testing.T) {
	p := workflows.Progress{Rollouts: 128, Done: 64, Failed: 3, Running: 32, MeanReward: 0.9}
	line := renderProgress(p, 4*time.Second, 32)
	for _, want := range []string{"64/128 done", "3 failed", "32 running", "8.0/s", "ETA 8s", "reward 0.900"} {
		assert.Contains(t, line, want, "renderProgress(%+v) = %q", p, line)
	}
	assert.Equal(t, 12, strings.Count(line, "█"), "half of a 24-cell bar is filled")

	fresh := renderProgress(workflows.Progress{Rollouts: 10}, 0, 0)
	assert.NotContains(t, fresh, "ETA", "no rate before anything finished")
	assert.NotContains(t, fresh, "reward")
}

func TestIsLocal(t *testing.T) {
	for addr, want := range map[string]bool{
		"localhost:7233": true, "127.0.0.1:7233": true, "[::1]:7233": true,
		"temporal.example:7233": false, "10.0.0.5:7233": false, "7233": false,
	} {
		assert.Equal(t, want, isLocal(addr), "isLocal(%q)", addr)
	}
}

// A notice clears the bar's line, prints, and draws the bar again below it:
// nothing lands in the middle of the bar.
func TestProgressNoticeAboveBar(t *testing.T) {
	var buf bytes.Buffer
	bar := &progressBar{w: &buf, tty: true}
	p := workflows.Progress{Rollouts: 10, Done: 5}
	bar.draw(p)
	line := renderProgress(p, 0, 0)
	require.Equal(t, "\r\033[K"+line, buf.String())

	buf.Reset()
	bar.notice("No worker polls task queue %q", "q")
	assert.Equal(t, "\r\033[KNo worker polls task queue \"q\"\n"+line, buf.String())

	buf.Reset()
	bar.finish()
	bar.notice("epoch 1 of 2 epochs")
	assert.Equal(t, "\nepoch 1 of 2 epochs\n", buf.String(), "no bar: the notice is a line of its own")

	var plain bytes.Buffer
	bar = &progressBar{w: &plain}
	bar.draw(p)
	bar.notice("warning")
	assert.Equal(t, line+"\nwarning\n", plain.String(), "not a terminal: lines")
}
