package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const stream = `{"Action":"start","Package":"m/a"}
{"Action":"run","Package":"m/a","Test":"TestQuiet"}
{"Action":"output","Package":"m/a","Test":"TestQuiet","Output":"quiet output\n"}
{"Action":"pass","Package":"m/a","Test":"TestQuiet","Elapsed":0.5}
{"Action":"run","Package":"m/a","Test":"TestBroken"}
{"Action":"output","Package":"m/a","Test":"TestBroken/sub","Output":"sub says why\n"}
{"Action":"fail","Package":"m/a","Test":"TestBroken/sub","Elapsed":9}
{"Action":"output","Package":"m/a","Test":"TestBroken","Output":"--- FAIL: TestBroken\n"}
{"Action":"fail","Package":"m/a","Test":"TestBroken","Elapsed":9.5}
{"Action":"fail","Package":"m/a","Elapsed":10.2}
{"Action":"pass","Package":"m/b","Elapsed":3}
{"ImportPath":"m/c","Action":"build-output","Output":"c.go:1: syntax error\n"}
{"ImportPath":"m/c","Action":"build-fail"}
`

func TestReportShowsFailuresAndTheSlowest(t *testing.T) {
	var out bytes.Buffer
	r := newReport(&out)
	require.NoError(t, r.read(strings.NewReader(stream)))
	r.summary(1)
	got := out.String()

	assert.True(t, r.failed)
	assert.NotContains(t, got, "quiet output", "a passing test's output is not shown")
	assert.Contains(t, got, "sub says why\n")
	assert.Contains(t, got, "--- FAIL: TestBroken\n")
	assert.Contains(t, got, "FAIL\tm/a\t10.2s\n")
	assert.Contains(t, got, "ok  \tm/b\t3.0s\n")
	assert.Contains(t, got, "c.go:1: syntax error\n", "a build failure is shown")
	assert.Contains(t, got, "the 1 slowest packages\n      10.2s  m/a\n")
	assert.Contains(t, got, "the 1 slowest tests\n       9.5s  m/a TestBroken\n", "top-level tests only")
}

func TestReportPassing(t *testing.T) {
	var out bytes.Buffer
	r := newReport(&out)
	require.NoError(t, r.read(strings.NewReader(`{"Action":"pass","Package":"m/b","Elapsed":3}`+"\n")))
	assert.False(t, r.failed)
}
