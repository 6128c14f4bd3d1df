package activities_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
)

// passingTest is a verifier that leaves verdict.json among the artifacts
// and passes.
const passingTest = `logs="${EVALFLOW_LOGS:-/logs}"
echo '{"passed": true}' > "$logs/artifacts/verdict.json"
echo 1 > "$logs/verifier/reward.txt"
`

// artifactTask is a Harbor task in a directory of its own verified by
// test; the returned PNG is a picture for an agent to leave among the
// artifacts.
func artifactTask(t *testing.T, test string) (root string, picture []byte) {
	t.Helper()
	root = t.TempDir()
	files := map[string]string{
		"keep/task.toml":      "version = \"1.0\"\n[verifier]\ntimeout_sec = 60.0\n",
		"keep/instruction.md": "Leave a report among the artifacts.\n",
		"keep/tests/test.sh":  test,
	}
	for name, content := range files {
		path := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	return root, b.Bytes()
}

// artifactsByPath indexes a trace's artifacts by their path.
func artifactsByPath(tr *trace.Rollout) map[string]trace.Artifact {
	m := map[string]trace.Artifact{}
	for _, a := range tr.Artifacts {
		m[a.Path] = a
	}
	return m
}

// verifyArtifacts runs a rollout of the artifact task with the agent
// script through Run and Verify and returns its stored trace.
func verifyArtifacts(t *testing.T, root, agent string) *trace.Rollout {
	t.Helper()
	r, _ := verifiedRig(t)
	ref := stepRef(root, rollout.HarnessConfig{Command: []string{"sh", "-c", agent}})
	s := r.runForVerify(t, ref, time.Minute)
	require.NotNil(t, s.Verify, "the rollout waits for its verifier")
	val, err := r.env.ExecuteActivity(r.acts.Verify, rollout.VerifyInput{Rollout: ref})
	require.NoError(t, err)
	var done rollout.Summary
	require.NoError(t, val.Get(&done))
	require.Equal(t, 1.0, done.Reward)
	tr, err := r.store.Trace(context.Background(), "run", ref.Key())
	require.NoError(t, err)
	return tr
}

// TestArtifactsAreKeptWithTheTrace: what the agent and the verifier leave
// in /logs/artifacts is in the stored trace, text as it is and a picture
// in base64, each with its type; the rollout's secret is taken out of
// them; a file past the attempt's limit is listed without its content; a
// link is listed, never followed.
func TestArtifactsAreKeptWithTheTrace(t *testing.T) {
	root, picture := artifactTask(t, passingTest)
	pic := filepath.Join(t.TempDir(), "plot.png")
	require.NoError(t, os.WriteFile(pic, picture, 0o644))
	agent := `a="$EVALFLOW_LOGS/artifacts"; mkdir -p "$a/charts"
echo "key=$OPENAI_API_KEY" > "$a/report.txt"
cp "` + pic + `" "$a/charts/plot.png"
printf 'bin\000%s' "$OPENAI_API_KEY" > "$a/key.bin"
head -c 9437184 /dev/zero > "$a/huge.bin"
ln -s /etc/passwd "$a/passwd"; ln -s /etc "$a/etc"`
	tr := verifyArtifacts(t, root, agent)
	got := artifactsByPath(tr)
	assert.Len(t, got, 7, "%v", tr.Artifacts)

	report := got["report.txt"]
	assert.Equal(t, trace.ArtifactText, report.Encoding)
	assert.Equal(t, "text/plain; charset=utf-8", report.MediaType)
	assert.Equal(t, "key=[rollout secret]\n", report.Content, "the rollout's secret is taken out")

	plot := got["charts/plot.png"]
	assert.Equal(t, "image/png", plot.MediaType)
	assert.Equal(t, trace.ArtifactBase64, plot.Encoding)
	assert.Equal(t, base64.StdEncoding.EncodeToString(picture), plot.Content)
	assert.Equal(t, int64(len(picture)), plot.Size)

	verdict := got["verdict.json"]
	assert.Equal(t, "application/json", verdict.MediaType, "the verifier's artifact is kept too")
	assert.Equal(t, "{\"passed\": true}\n", verdict.Content)

	key, err := base64.StdEncoding.DecodeString(got["key.bin"].Content)
	require.NoError(t, err)
	assert.Equal(t, "bin\x00[rollout secret]", string(key), "the secret is out of binary content too")

	huge := got["huge.bin"]
	assert.Equal(t, int64(9<<20), huge.Size)
	assert.Empty(t, huge.Content)
	assert.Contains(t, huge.Omitted, "8 MiB")

	for _, link := range []string{"passwd", "etc"} {
		assert.Empty(t, got[link].Content, link)
		assert.Equal(t, "not a regular file", got[link].Omitted, link)
	}
	for p := range got {
		assert.NotContains(t, p, "etc/", "a linked directory is not walked")
	}
}

// TestArtifactsPastTheFileLimitAreListed: past 256 files an attempt keeps
// the rest by name and size only, and says so.
func TestArtifactsPastTheFileLimitAreListed(t *testing.T) {
	root, _ := artifactTask(t, passingTest)
	agent := `cd "$EVALFLOW_LOGS/artifacts" && for i in $(seq 1000 1299); do echo "$i" > "n$i.txt"; done`
	tr := verifyArtifacts(t, root, agent)
	require.Len(t, tr.Artifacts, 301, "300 files and the verifier's")
	var kept int
	for _, a := range tr.Artifacts {
		if a.Kept() {
			kept++
			continue
		}
		assert.Positive(t, a.Size, a.Path)
		assert.Contains(t, a.Omitted, "256 files", a.Path)
	}
	assert.Equal(t, 256, kept)
}

// TestArtifactsOfAFailedAttemptAreKept: a verifier that writes no reward
// fails the attempt, whose kept trace holds what the agent and the
// verifier left.
func TestArtifactsOfAFailedAttemptAreKept(t *testing.T) {
	root, _ := artifactTask(t, `echo crashed > "${EVALFLOW_LOGS:-/logs}/artifacts/crash.txt"; exit 3`)
	r, _ := verifiedRig(t)
	ref := stepRef(root, rollout.HarnessConfig{Command: []string{"sh", "-c", `echo draft > "$EVALFLOW_LOGS/artifacts/draft.txt"`}})
	require.NotNil(t, r.runForVerify(t, ref, time.Minute).Verify)
	_, err := r.env.ExecuteActivity(r.acts.Verify, rollout.VerifyInput{Rollout: ref})
	require.Error(t, err)

	attempts, err := r.store.Attempts(context.Background(), "run", ref.Key())
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	got := artifactsByPath(&attempts[0].Rollout)
	assert.Equal(t, "draft\n", got["draft.txt"].Content)
	assert.Equal(t, "crashed\n", got["crash.txt"].Content)
}
