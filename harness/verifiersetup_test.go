package harness

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/tasksets"
)

func TestVerifierSetupOf(t *testing.T) {
	tests := []struct {
		info    string
		want    VerifierSetup
		wantErr string
	}{
		{``, VerifierSetup{Mode: VerifierShared}, ""},
		{`{"verifier":{"timeout_sec":60}}`, VerifierSetup{Mode: VerifierShared}, ""},
		{`{"verifier":{"environment_mode":"separate","environment":{"docker_image":"img"}},"artifacts":["/app/a.txt",{"source":"/out/"}]}`,
			VerifierSetup{Mode: VerifierSeparate, Environment: &Environment{DockerImage: "img"}, Artifacts: []string{"/app/a.txt", "/out"}}, ""},
		{`{"verifier":{"environment_mode":"apart"}}`, VerifierSetup{}, `task t: [verifier] environment_mode "apart": want "shared" or "separate"`},
		{`{"artifacts":["app/a.txt"]}`, VerifierSetup{}, `task t: artifacts[0] "app/a.txt": want an absolute path below /`},
		{`{"artifacts":[{"destination":"/x"}]}`, VerifierSetup{}, `task t: artifacts[0]: want a path or a table with a source`},
	}
	for _, tt := range tests {
		got, err := VerifierSetupOf(tasksets.Task{ID: "t", Info: []byte(tt.info)})
		if tt.wantErr != "" {
			assert.EqualError(t, err, tt.wantErr, "VerifierSetupOf(%s)", tt.info)
			continue
		}
		require.NoError(t, err, "VerifierSetupOf(%s)", tt.info)
		assert.Equal(t, tt.want, got, "VerifierSetupOf(%s)", tt.info)
	}
}
