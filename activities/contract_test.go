package activities_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/activities"
	"github.com/evalflow/evalflow/rollout"
)

// TestMethodsMatchContract holds the worker's activity methods to the
// contract the workflows schedule by name: a renamed method or a changed
// input or result type would otherwise fail only at run time.
func TestMethodsMatchContract(t *testing.T) {
	typ := reflect.TypeFor[*activities.Activities]()
	ctxType := reflect.TypeFor[context.Context]()
	errType := reflect.TypeFor[error]()
	for _, want := range rollout.Activities {
		m, ok := typ.MethodByName(want.Name)
		require.True(t, ok, "*Activities has no method %s", want.Name)
		f := m.Type // receiver first
		require.Equal(t, 3, f.NumIn(), "%s(ctx, input)", want.Name)
		assert.Equal(t, ctxType, f.In(1), "%s takes a context first", want.Name)
		assert.Equal(t, reflect.TypeOf(want.Input), f.In(2), "%s input", want.Name)
		if want.Result == nil {
			require.Equal(t, 1, f.NumOut(), "%s returns only an error", want.Name)
		} else {
			require.Equal(t, 2, f.NumOut(), "%s returns a result and an error", want.Name)
			assert.Equal(t, reflect.TypeOf(want.Result), f.Out(0), "%s result", want.Name)
		}
		assert.Equal(t, errType, f.Out(f.NumOut()-1), "%s returns an error last", want.Name)
	}
}
