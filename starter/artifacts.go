package main

import (
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/trace"
)

// artifactFile is one artifact as `starter results --rollouts` lists it:
// its content is in the trace (trace_body, attempts).
type artifactFile struct {
	Path      string `json:"path"`
	Size      int64  `json:"size"`
	MediaType string `json:"media_type,omitempty"`
	// Omitted says why the trace holds no content for it.
	Omitted string `json:"omitted,omitempty"`
}

// listArtifacts sets line's artifact count and listing from tr, the trace
// of the attempt that made the record (nil: none).
func (line *storedRollout) listArtifacts(tr *trace.Rollout) {
	if tr == nil {
		return
	}
	line.ArtifactCount = len(tr.Artifacts) + tr.ArtifactsUnlisted
	for _, a := range tr.Artifacts {
		line.ArtifactFiles = append(line.ArtifactFiles, artifactFile{Path: a.Path, Size: a.Size, MediaType: a.MediaType, Omitted: a.Omitted})
	}
}

// recordAttempt is the trace of attempt n among attempts, nil when none is
// stored.
func recordAttempt(attempts []results.Attempt, n int) *trace.Rollout {
	for i := range attempts {
		if attempts[i].N == n {
			return &attempts[i].Rollout
		}
	}
	return nil
}
