package viewer

import (
	"bytes"
	"encoding/base64"

	"github.com/evalflow/evalflow/results"
)

// redactArtifacts takes the viewer's secrets and anything credential-shaped
// out of the attempts' base64 artifacts, in which writeJSON's redaction of
// the served document cannot find them; their text artifacts it redacts as
// it redacts a harness's output.
func (v *Viewer) redactArtifacts(attempts []results.Attempt) {
	for i := range attempts {
		arts := attempts[i].Artifacts
		for j := range arts {
			if !arts[j].Binary() {
				continue
			}
			b, err := base64.StdEncoding.DecodeString(arts[j].Content)
			if err != nil {
				arts[j].Content, arts[j].Omitted = "", "not valid base64"
				continue
			}
			if r := v.redact(b); !bytes.Equal(r, b) {
				arts[j].Content = base64.StdEncoding.EncodeToString(r)
			}
		}
	}
}
