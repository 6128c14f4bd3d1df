package dockerfile

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lookup is the variables a test's Dockerfile does not set itself.
type lookup map[string]string

func (m lookup) get(name string) string { return m[name] }

// A Dockerfile's subset as a plan: the last stage only, variables
// expanded from ARG, ENV and the lookup, a relative WORKDIR joined, and
// the lines only an engine can carry out named with their line.
func TestInterpret(t *testing.T) {
	ins, err := Parse([]byte(`FROM golang AS build
RUN go build
FROM ${BASE:-debian}
ARG DIR=srv
ENV GREETING="hello world" \
    HOME_DIR=/home/$USER
WORKDIR /${DIR}
WORKDIR app
COPY --chown=1000 a.txt b.txt ./
RUN <<EOF
echo in a heredoc
EOF
CMD ["run"]
`))
	require.NoError(t, err)
	plan, err := Interpret(ins, lookup{"USER": "agent"}.get)
	require.NoError(t, err)
	assert.Equal(t, "/srv/app", plan.Workdir)
	assert.Equal(t, []string{"GREETING=hello world", "HOME_DIR=/home/agent"}, plan.Env)
	assert.Equal(t, []copyOp{
		{in: ins[7], src: "a.txt", dst: "/srv/app", intoDir: true},
		{in: ins[7], src: "b.txt", dst: "/srv/app", intoDir: true},
	}, plan.copies)
	require.Len(t, plan.Unsupported, 2)
	assert.Equal(t, Unsupported{Line: 1, Instruction: "FROM golang AS build", Reason: "build stages before the last are not built outside a container engine"}, plan.Unsupported[0])
	assert.Equal(t, 10, plan.Unsupported[1].Line, "the RUN with a heredoc")
	assert.Contains(t, plan.Notes, `CMD ["run"]: skipped outside docker`)
}
