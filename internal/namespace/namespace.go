// Package namespace makes a Temporal namespace ready for evalflow: the
// namespace itself and the search attributes runs are found by. `starter
// setup` and the embedded server use it; the binaries check with it at start
// so a missing piece is named, with the command that adds it.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/evalflow/evalflow/workflows"
)

// Services are the two Temporal APIs setup speaks; an SDK client's
// WorkflowService() and OperatorService() are them.
type Services struct {
	Workflow workflowservice.WorkflowServiceClient
	Operator operatorservice.OperatorServiceClient
}

// Want is what a namespace must have.
type Want struct {
	Namespace string
	// Retention is how long closed runs' histories are kept, for a
	// namespace Ensure creates.
	Retention time.Duration
	// Attributes are the custom search attributes and their types.
	Attributes map[string]enumspb.IndexedValueType
	// Optional names attributes Ensure registers but Check does not
	// require: added after namespaces were set up without them, runs
	// start without them there (see run.Start).
	Optional []string
}

// Step is one thing Ensure found or did.
type Step struct {
	What string
	// Done is false for what was already in place.
	Done bool
}

// DeniedError is a cluster that refused to let this caller create what is
// missing (a Temporal Cloud namespace, a role without operator rights):
// Commands are what an operator runs instead.
type DeniedError struct {
	Missing  []string
	Commands []string
	Err      error
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("the cluster refused to create %s (%v); an operator can run:\n  %s",
		strings.Join(e.Missing, " and "), e.Err, strings.Join(e.Commands, "\n  "))
}

func (e *DeniedError) Unwrap() error { return e.Err }

// MissingError is a namespace found without what evalflow needs.
type MissingError struct {
	Namespace string
	Missing   []string
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("Temporal namespace %q lacks %s", e.Namespace, strings.Join(e.Missing, " and "))
}

// Check reports what of want the cluster lacks, as a *MissingError, or nil.
// An attribute registered with another type is an error of its own.
func Check(ctx context.Context, s Services, want Want) error {
	exists, err := namespaceExists(ctx, s, want.Namespace)
	if err != nil {
		return err
	}
	if !exists {
		return &MissingError{Namespace: want.Namespace, Missing: []string{"the namespace itself"}}
	}
	missing, err := missingAttributes(ctx, s, want)
	if err != nil {
		return err
	}
	missing = slices.DeleteFunc(missing, func(name string) bool { return slices.Contains(want.Optional, name) })
	if len(missing) > 0 {
		return &MissingError{Namespace: want.Namespace, Missing: []string{"search attributes " + strings.Join(missing, ", ")}}
	}
	return nil
}

// Ensure creates the namespace when it is missing and registers the missing
// attributes; what was in place is left alone. A refusal is a *DeniedError
// naming the commands to run instead.
func Ensure(ctx context.Context, s Services, want Want) ([]Step, error) {
	var steps []Step
	exists, err := namespaceExists(ctx, s, want.Namespace)
	if err != nil {
		return nil, err
	}
	if exists {
		steps = append(steps, Step{What: fmt.Sprintf("namespace %q exists", want.Namespace)})
	} else {
		_, err := s.Workflow.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace:                        want.Namespace,
			WorkflowExecutionRetentionPeriod: durationpb.New(want.Retention),
			Description:                      "evalflow runs",
		})
		var already *serviceerror.NamespaceAlreadyExists
		switch {
		case errors.As(err, &already):
		case denied(err):
			return nil, deniedError(want, true, slices.Sorted(maps.Keys(want.Attributes)), err)
		case err != nil:
			return nil, fmt.Errorf("create namespace %q: %w", want.Namespace, err)
		}
		steps = append(steps, Step{What: fmt.Sprintf("namespace %q created (retention %s)", want.Namespace, want.Retention), Done: true})
		if err := waitUsable(ctx, s, want.Namespace); err != nil {
			return nil, err
		}
	}
	missing, err := missingAttributes(ctx, s, want)
	if err != nil {
		return nil, err
	}
	if len(missing) == 0 {
		return append(steps, Step{What: "search attributes " + strings.Join(slices.Sorted(maps.Keys(want.Attributes)), ", ") + " registered"}), nil
	}
	add := map[string]enumspb.IndexedValueType{}
	for _, name := range missing {
		add[name] = want.Attributes[name]
	}
	_, err = s.Operator.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: want.Namespace, SearchAttributes: add})
	switch {
	case denied(err):
		return nil, deniedError(want, false, missing, err)
	case err != nil:
		return nil, fmt.Errorf("add search attributes %s to namespace %q: %w", strings.Join(missing, ", "), want.Namespace, err)
	}
	if err := waitAttributes(ctx, s, want.Namespace, missing); err != nil {
		return nil, err
	}
	return append(steps, Step{What: "search attributes " + strings.Join(missing, ", ") + " added", Done: true}), nil
}

// waitAttributes waits until the frontend takes attributes just added:
// it knows them from its namespace cache, refreshed every few seconds, and
// until then refuses a run started with them. A query naming them is
// refused as long as a start would be.
func waitAttributes(ctx context.Context, s Services, namespace string, names []string) error {
	terms := make([]string, len(names))
	for i, name := range names {
		terms[i] = name + " = ''"
	}
	req := &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace, Query: strings.Join(terms, " AND ")}
	delay := 100 * time.Millisecond
	for {
		_, err := s.Workflow.CountWorkflowExecutions(ctx, req)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("search attributes %s were added to namespace %q but are not usable yet: %w", strings.Join(names, ", "), namespace, err)
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// AddAttributes registers the attributes of want missing from its
// namespace, which exists.
func AddAttributes(ctx context.Context, op operatorservice.OperatorServiceClient, want Want) error {
	missing, err := missingAttributes(ctx, Services{Operator: op}, want)
	if err != nil || len(missing) == 0 {
		return err
	}
	add := map[string]enumspb.IndexedValueType{}
	for _, name := range missing {
		add[name] = want.Attributes[name]
	}
	if _, err := op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: want.Namespace, SearchAttributes: add}); err != nil {
		return fmt.Errorf("add search attributes: %w", err)
	}
	return nil
}

func namespaceExists(ctx context.Context, s Services, name string) (bool, error) {
	_, err := s.Workflow.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: name})
	var notFound *serviceerror.NamespaceNotFound
	switch {
	case errors.As(err, &notFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("describe namespace %q: %w", name, err)
	}
	return true, nil
}

// missingAttributes lists the attributes of want its namespace lacks, in
// name order; one registered with another type is an error.
func missingAttributes(ctx context.Context, s Services, want Want) ([]string, error) {
	if len(want.Attributes) == 0 {
		return nil, nil
	}
	have, err := s.Operator.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: want.Namespace})
	if err != nil {
		return nil, fmt.Errorf("list search attributes of namespace %q: %w", want.Namespace, err)
	}
	var missing []string
	for _, name := range slices.Sorted(maps.Keys(want.Attributes)) {
		got, ok := have.GetCustomAttributes()[name]
		switch {
		case !ok:
			missing = append(missing, name)
		case got != want.Attributes[name]:
			return nil, fmt.Errorf("search attribute %s is %s in namespace %q, evalflow needs %s: remove it (temporal operator search-attribute remove --namespace %s --name %s) and run setup again",
				name, got, want.Namespace, want.Attributes[name], want.Namespace, name)
		}
	}
	return missing, nil
}

// waitUsable waits until a just-created namespace answers: it reaches every
// frontend through the namespace cache, within seconds.
func waitUsable(ctx context.Context, s Services, name string) error {
	delay := 100 * time.Millisecond
	for {
		_, err := s.Operator.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: name})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %q was created but does not answer yet: %w", name, err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

func denied(err error) bool {
	var pd *serviceerror.PermissionDenied
	var un *serviceerror.Unimplemented
	return errors.As(err, &pd) || errors.As(err, &un)
}

func deniedError(want Want, namespace bool, attrs []string, err error) *DeniedError {
	d := &DeniedError{Err: err}
	if namespace {
		d.Missing = append(d.Missing, fmt.Sprintf("namespace %q", want.Namespace))
		d.Commands = append(d.Commands, fmt.Sprintf("temporal operator namespace create --namespace %s --retention %s", want.Namespace, want.Retention))
	}
	if len(attrs) > 0 {
		d.Missing = append(d.Missing, "search attributes "+strings.Join(attrs, ", "))
	}
	for _, name := range attrs {
		d.Commands = append(d.Commands, fmt.Sprintf("temporal operator search-attribute create --namespace %s --name %s --type %s",
			want.Namespace, name, typeName(want.Attributes[name])))
	}
	return d
}

// typeName is an attribute type as the temporal CLI spells it (Keyword).
func typeName(t enumspb.IndexedValueType) string {
	s := strings.TrimPrefix(t.String(), "INDEXED_VALUE_TYPE_")
	parts := strings.Split(strings.ToLower(s), "_")
	for i, p := range parts {
		if p != "" {
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, "")
}

// DefaultRetention is how long a namespace setup creates keeps closed runs.
const DefaultRetention = 72 * time.Hour

// Attributes are evalflow's search attributes (workflows.SearchAttributes
// sets them on every run's workflows).
func Attributes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		workflows.AttrRunID:   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		workflows.AttrModel:   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		workflows.AttrTaskset: enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		workflows.AttrHarness: enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	}
}

// Evalflow is what evalflow needs of namespace.
func Evalflow(namespace string) Want {
	return Want{Namespace: namespace, Retention: DefaultRetention, Attributes: Attributes(), Optional: []string{workflows.AttrHarness}}
}
