package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/docscheck"
)

// TestDocsNameEveryFlag: every flag of the worker is documented
// in docs/.
func TestDocsNameEveryFlag(t *testing.T) {
	docs, err := docscheck.Load("..", "docs/*.md")
	require.NoError(t, err)
	assert.Empty(t, docscheck.Undocumented(newApp(), docs), "flags no page of docs/ names as --flag")
}

// TestDocCommandLinesUseRealFlags: a starter command line shown in the docs
// names only commands and flags the worker has.
func TestDocCommandLinesUseRealFlags(t *testing.T) {
	docs, err := docscheck.Load("..", "*.md", "docs/*.md")
	require.NoError(t, err)
	assert.Empty(t, docscheck.BadCommandLines(newApp(), docs))
}
