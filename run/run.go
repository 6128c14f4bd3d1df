// Package run is a run's life on Temporal and in the run store: starting an
// evaluation or a training run, or attaching to one with the same id;
// resuming a run, refusing changed settings unless forced; and reading its
// status from Temporal or, when Temporal does not know it, from the store.
//
// It draws nothing: the starter prints what these functions return, and the
// viewer serves it.
package run

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/evalflow/evalflow/workflows"
)

// ErrNotFound is a run that Temporal (or the run store) does not know.
var ErrNotFound = errors.New("no such run")

// WorkflowURL links a workflow in the Temporal Web UI at ui; no UI, no link.
func WorkflowURL(ui, namespace, workflowID string) string {
	if ui == "" {
		return ""
	}
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s", strings.TrimRight(ui, "/"),
		url.PathEscape(namespace), url.PathEscape(workflowID))
}

// ListURL links the list of every workflow of a run (its epochs too) in the
// Temporal Web UI at ui, found by the run id search attribute.
func ListURL(ui, namespace, runID string) string {
	if ui == "" {
		return ""
	}
	query := url.Values{"query": {fmt.Sprintf("%s=%q", workflows.AttrRunID, runID)}}.Encode()
	return fmt.Sprintf("%s/namespaces/%s/workflows?%s", strings.TrimRight(ui, "/"), url.PathEscape(namespace), query)
}
