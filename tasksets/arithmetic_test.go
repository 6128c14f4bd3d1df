package tasksets

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/arith"
)

func TestArithmeticDeterministic(t *testing.T) {
	ctx := context.Background()
	a, b := Arithmetic{Seed: 7}, Arithmetic{Seed: 7}
	for _, i := range []int64{0, 1, 99, 1 << 40} {
		ta, err := a.Task(ctx, i)
		require.NoError(t, err)
		tb, err := b.Task(ctx, i)
		require.NoError(t, err)
		assert.Equal(t, ta, tb, "Task(%d) differs for the same seed", i)

		var info struct{ Expression string }
		require.NoError(t, json.Unmarshal(ta.Info, &info))
		v, err := arith.Eval(info.Expression)
		require.NoError(t, err)
		assert.Equal(t, arith.Format(v), ta.Answer, "Task(%d) answer for %q", i, info.Expression)
		found, _ := arith.Find(ta.Prompt)
		assert.Equal(t, info.Expression, found, "Find(%q)", ta.Prompt)
	}
}

func TestArithmeticSeedsDiffer(t *testing.T) {
	ctx := context.Background()
	differ := 0
	for i := range int64(20) {
		t1, err := Arithmetic{Seed: 1}.Task(ctx, i)
		require.NoError(t, err)
		t2, err := Arithmetic{Seed: 2}.Task(ctx, i)
		require.NoError(t, err)
		assert.NotEqual(t, t1.ID, t2.ID)
		if t1.Prompt != t2.Prompt {
			differ++
		}
	}
	assert.Greater(t, differ, 15, "seeds 1 and 2 gave only %d/20 different prompts", differ)
}

func TestArithmeticLen(t *testing.T) {
	ctx := context.Background()
	assert.Equal(t, Infinite, Arithmetic{}.Len())
	finite := Arithmetic{Size: 3}
	assert.Equal(t, int64(3), finite.Len())
	_, err := finite.Task(ctx, 2)
	assert.NoError(t, err)
	_, err = finite.Task(ctx, 3)
	assert.Error(t, err)
	_, err = Arithmetic{}.Task(ctx, -1)
	assert.Error(t, err)
}
