package activities

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/rollout"
)

func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		s      rollout.Summary
		err    error
		status string
		kind   string
	}{
		{"ok", rollout.Summary{Status: rollout.StatusOK}, nil, rollout.StatusOK, ""},
		{"agent failure", rollout.Summary{Status: rollout.StatusError, ErrorKind: rollout.KindMaxTurns}, nil, rollout.StatusError, rollout.KindMaxTurns},
		{"retried infrastructure", rollout.Summary{}, fmt.Errorf("run: %w", temporal.NewApplicationError("tunnel died", rollout.ErrTypeTunnel)), "retry", rollout.ErrTypeTunnel},
		{"not retried", rollout.Summary{}, temporal.NewNonRetryableApplicationError("lost", rollout.ErrTypeSlotLost, nil), rollout.StatusError, rollout.ErrTypeSlotLost},
		{"other", rollout.Summary{}, errors.Join(context.Canceled), rollout.StatusError, "other"},
	} {
		status, kind := outcomeOf(tc.s, tc.err)
		assert.Equal(t, tc.status, status, "%s: status", tc.name)
		assert.Equal(t, tc.kind, kind, "%s: error kind", tc.name)
	}
}
