package main

import (
	"testing"

	"github.com/evalflow/evalflow/internal/docscheck"
)

// TestCommandLine: every flag of the worker is documented in docs/, a
// worker command line shown in the docs names only flags the worker has,
// and --version names its build.
func TestCommandLine(t *testing.T) { docscheck.Binary(t, "..", newApp) }
