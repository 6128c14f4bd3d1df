package main

import (
	"testing"

	"github.com/evalflow/evalflow/internal/docscheck"
)

// TestCommandLine: every flag of every starter command is documented in
// docs/, a starter command line shown in the docs names only commands and
// flags the starter has, and --version names its build.
func TestCommandLine(t *testing.T) { docscheck.Binary(t, "..", newApp) }
