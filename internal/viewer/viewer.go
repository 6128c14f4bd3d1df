// Package viewer is the run viewer: a read-only web page over the run store
// listing runs, a run's figures and rollouts, and a rollout's transcript with
// every attempt. Its assets are embedded: no build step, nothing fetched.
//
// Everything it serves is JSON built from the store and drawn by the page
// with textContent, never as HTML; values that look like credentials, and the
// secrets it is given, are replaced by "[redacted]" before they leave.
package viewer

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"regexp"
	"strings"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/run"
)

//go:embed assets
var assets embed.FS

// Options shape a viewer. The zero value serves the store with no link to
// the Temporal UI.
type Options struct {
	// TemporalUI is the Temporal Web UI's address
	// (http://127.0.0.1:8233); when set, a rollout links to its workflow.
	TemporalUI string
	// Namespace is the Temporal namespace of the runs ("default" if empty).
	Namespace string
	// Secrets are values never served, whatever a trace holds: the API keys
	// the process knows of.
	Secrets []string
}

// Viewer serves the run viewer over a run store.
type Viewer struct {
	store results.Store
	opts  Options
	mux   *http.ServeMux
}

var _ http.Handler = (*Viewer)(nil)

// New returns the viewer of store.
func New(store results.Store, opts Options) *Viewer {
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	opts.TemporalUI = strings.TrimRight(opts.TemporalUI, "/")
	v := &Viewer{store: store, opts: opts, mux: http.NewServeMux()}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(static)
	v.mux.Handle("GET /assets/", http.StripPrefix("/assets/", files))
	v.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		setHeaders(w)
		http.ServeFileFS(w, r, static, "index.html")
	})
	v.mux.HandleFunc("GET /api/runs", v.runs)
	v.mux.HandleFunc("GET /api/runs/{run}", v.run)
	v.mux.HandleFunc("GET /api/runs/{run}/rollouts", v.rollouts)
	v.mux.HandleFunc("GET /api/runs/{run}/rollout", v.rollout)
	return v
}

// ServeHTTP serves the page, its assets and the JSON API under /api/.
func (v *Viewer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v.mux.ServeHTTP(w, r)
}

// setHeaders keeps the page to its own assets: no inline script, no
// framing, no guessing of content types.
func setHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

// errNotFound is a run or rollout the store does not hold.
var errNotFound = errors.New("not found")

// writeJSON serves v as JSON with credentials redacted.
func (v *Viewer) writeJSON(w http.ResponseWriter, body any, err error) {
	setHeaders(w)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		status := http.StatusInternalServerError
		switch {
		case errors.Is(err, errNotFound), errors.Is(err, run.ErrNotFound), errors.Is(err, fs.ErrNotExist):
			status = http.StatusNotFound
		case errors.Is(err, errBadRequest):
			status = http.StatusBadRequest
		}
		w.WriteHeader(status)
		body = map[string]string{"error": err.Error()}
	}
	b, err := json.Marshal(body)
	if err != nil {
		http.Error(w, "encode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = w.Write(v.redact(b))
}

// tokenShaped matches values shaped like API keys and bearer tokens;
// namedSecret an environment assignment or header whose name says it holds
// one, its name kept in the first group. Both only match characters that JSON
// does not escape, so a redacted document stays valid.
var (
	tokenShaped = regexp.MustCompile(`\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{16,}|(?i:bearer)\s+[A-Za-z0-9._~+/\-]{12,}=*`)
	namedSecret = regexp.MustCompile(`(?i)(\b[A-Z0-9_\-]*(?:api[_\-]?key|token|secret|password|authorization)(?:=|: ?))[^\s"\\,;]{4,}`)
)

// redact replaces the viewer's secrets and anything credential-shaped in b.
func (v *Viewer) redact(b []byte) []byte {
	for _, s := range v.opts.Secrets {
		if len(s) >= 4 {
			b = bytes.ReplaceAll(b, []byte(s), []byte("[redacted]"))
		}
	}
	b = tokenShaped.ReplaceAll(b, []byte("[redacted]"))
	return namedSecret.ReplaceAll(b, []byte("${1}[redacted]"))
}
