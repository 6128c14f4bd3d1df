package trace

// Artifact is one file an agent or a verifier left under /logs/artifacts
// (Harbor's convention for what a trial keeps), as the attempt's trace
// holds it.
type Artifact struct {
	// Path is the file's path under /logs/artifacts, slash-separated.
	Path string `json:"path"`
	Size int64  `json:"size"`
	// MediaType is the file's type, from its content and its extension
	// (image/png, text/plain; charset=utf-8, application/json).
	MediaType string `json:"media_type,omitempty"`
	// Encoding is how Content holds the file: ArtifactText (as it is) or
	// ArtifactBase64.
	Encoding string `json:"encoding,omitempty"`
	Content  string `json:"content,omitempty"`
	// Omitted says why the content is not kept (the file is past the
	// attempt's limits, or is not a regular file); empty when it is.
	Omitted string `json:"omitted,omitempty"`
}

// How an Artifact's Content holds the file.
const (
	// ArtifactText: UTF-8 text, as the file holds it.
	ArtifactText = "text"
	// ArtifactBase64: the file's bytes in standard base64.
	ArtifactBase64 = "base64"
)

// Kept reports whether the artifact's content is in the trace.
func (a Artifact) Kept() bool { return a.Omitted == "" }

// Binary reports whether Content holds the file in base64.
func (a Artifact) Binary() bool { return a.Encoding == ArtifactBase64 }
