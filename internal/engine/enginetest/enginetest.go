// Package enginetest gives tests a client of the container engine that
// `make engine` (scripts/engine.sh) serves. A test that needs the engine
// fails, never skips, when it does not answer.
package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/engine"
)

// BaseImage is the Debian image scripts/engine.sh builds and tags.
const BaseImage = "docker.io/library/debian:bookworm-slim"

// Client is a client of the engine DOCKER_HOST names, checked to answer
// and to hold BaseImage.
func Client(t testing.TB) *engine.Client {
	t.Helper()
	c, err := engine.FromEnv()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = c.Version(ctx)
	require.NoError(t, err, "no container engine answers at %s: run `make engine` (scripts/engine.sh) first", c.Host())
	_, err = c.InspectImage(ctx, BaseImage)
	require.NoError(t, err, "the engine lacks %s: run `make engine` (scripts/engine.sh)", BaseImage)
	t.Cleanup(c.Close)
	return c
}
