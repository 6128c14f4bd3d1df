package evalflow_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/docscheck"
)

// TestDocLinksResolve: every relative link of the docs leads to a file of
// the repository, and an anchor into a Markdown file to one of its headings.
func TestDocLinksResolve(t *testing.T) {
	docs, err := docscheck.Load(".", "*.md", "docs/*.md")
	require.NoError(t, err)
	assert.Empty(t, docscheck.BrokenLinks(".", docs))
}

// TestArchitectureNamesRealTests: every test ARCHITECTURE.md names as the
// holder of an invariant is a test function of the repository.
func TestArchitectureNamesRealTests(t *testing.T) {
	docs, err := docscheck.Load(".", "ARCHITECTURE.md")
	require.NoError(t, err)
	unknown, err := docscheck.UnknownTests(".", docs[0])
	require.NoError(t, err)
	assert.Empty(t, unknown, "tests ARCHITECTURE.md names that do not exist")
}
