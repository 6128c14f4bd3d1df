package tasksets

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// RegistryEnv names the registry --taskset name@version resolves through
// when no --registry is given: a file path or an http(s) URL.
const RegistryEnv = "EVALFLOW_REGISTRY"

// registryPrefix starts a resolved registry taskset's reference:
// registry:name@version#lock, the lock holding every task's repository,
// commit and path, so that a worker needs no registry.
const registryPrefix = "registry:"

// registryLimit bounds a registry document.
const registryLimit = 64 << 20

// RegistryTask is one task of a registry dataset: in Harbor's registry.json
// format, the task directory at Path in the repository GitURL at commit
// GitCommitID (in a registry, also HEAD, a branch or a tag, pinned to a
// commit when the dataset is resolved); from Harbor's package registry,
// the task archive at Archive whose content digest is Digest.
type RegistryTask struct {
	Name        string `json:"name"`
	GitURL      string `json:"git_url,omitempty"`
	GitCommitID string `json:"git_commit_id,omitempty"`
	Path        string `json:"path,omitempty"`
	Archive     string `json:"archive,omitempty"`
	Digest      string `json:"digest,omitempty"`
}

// Dataset is one version of a dataset in a registry (Harbor's registry.json
// is a JSON array of them).
type Dataset struct {
	Name        string         `json:"name"`
	Version     string         `json:"version"`
	Description string         `json:"description,omitempty"`
	Tasks       []RegistryTask `json:"tasks"`
}

// datasetRef is name@version or org/name@ref, as --taskset names a
// registry dataset.
var datasetRef = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]*/)?[A-Za-z0-9][A-Za-z0-9._-]*@(sha256:[0-9a-f]{64}|[A-Za-z0-9][A-Za-z0-9._+-]*)$`)

// gitRefName is what a registry's git_commit_id may name besides a full
// commit: HEAD, a branch or a tag.
var gitRefName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/+-]*$`)

// commitID is a full commit id (SHA-1 or SHA-256): registries pin commits.
var commitID = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

// IsDatasetRef reports whether ref names a registry dataset (name@version
// or org/name@ref) rather than a file or a bundled taskset.
func IsDatasetRef(ref string) bool {
	if !datasetRef.MatchString(ref) {
		return false
	}
	_, err := os.Stat(ref)
	return err != nil
}

// ReadRegistry reads a registry from src: an http(s) URL or a file path.
// It checks every dataset: a name, a version, tasks each with a name, a
// git_url, a git_commit_id (a full commit id, or HEAD, a branch or a tag,
// which ResolveDataset pins; absent is HEAD, as in Harbor) and a relative
// path inside the repository.
func ReadRegistry(ctx context.Context, src string) ([]Dataset, error) {
	var data []byte
	var err error
	if strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://") {
		data, err = fetchRegistry(ctx, src)
	} else {
		data, err = readRegistryFile(src)
	}
	if err != nil {
		return nil, err
	}
	var ds []Dataset
	if err := json.Unmarshal(data, &ds); err != nil {
		return nil, fmt.Errorf("registry %s: not a JSON array of datasets (name, version, tasks): %w", redactURL(src), err)
	}
	var bad []string
	for i, d := range ds {
		where := fmt.Sprintf("dataset %d (%s@%s)", i, d.Name, d.Version)
		if d.Name == "" || d.Version == "" {
			bad = append(bad, where+": name and version are required")
		}
		seen := map[string]bool{}
		for j, t := range d.Tasks {
			if problem := t.problem(false); problem != "" {
				bad = append(bad, fmt.Sprintf("%s task %d (%s): %s", where, j, t.Name, problem))
			}
			if seen[t.Name] {
				bad = append(bad, fmt.Sprintf("%s: task name %s appears twice", where, t.Name))
			}
			seen[t.Name] = true
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("registry %s: %s", redactURL(src), strings.Join(bad, "; "))
	}
	return ds, nil
}

// problem says what is wrong with t, or "". A pinned task (a lock's) has
// a full commit id or an archive's digest; a registry's may name HEAD, a
// branch or a tag.
func (t RegistryTask) problem(pinned bool) string {
	var p []string
	if t.Name == "" || strings.ContainsAny(t.Name, "/\\") || strings.HasPrefix(t.Name, ".") {
		p = append(p, "name must be a plain name")
	}
	if t.Archive != "" {
		return strings.Join(append(p, t.archiveProblems()...), ", ")
	}
	switch {
	case t.GitURL == "":
		p = append(p, "git_url is required")
	case redactURL(t.GitURL) != t.GitURL:
		// The URL travels in the run's history: a token must not.
		p = append(p, "git_url must not hold a user or token (give credentials to git: a credential helper or an SSH key)")
	}
	switch {
	case commitID.MatchString(t.GitCommitID):
	case pinned:
		p = append(p, "git_commit_id must be a full commit id (40 hex digits), got "+fmt.Sprintf("%q", t.GitCommitID))
	case t.GitCommitID != "" && (!gitRefName.MatchString(t.GitCommitID) || strings.Contains(t.GitCommitID, "..")):
		p = append(p, "git_commit_id must be a full commit id, HEAD, a branch or a tag, got "+fmt.Sprintf("%q", t.GitCommitID))
	}
	if _, ok := cleanTaskPath(t.Path); !ok {
		p = append(p, fmt.Sprintf("path %q must be relative, inside the repository", t.Path))
	}
	return strings.Join(p, ", ")
}

// cleanTaskPath is p cleaned, or false when it leaves the repository.
func cleanTaskPath(p string) (string, bool) {
	c := path.Clean("/" + p)[1:]
	if strings.HasPrefix(p, "/") || strings.Contains(p, "\\") || slices.Contains(strings.Split(p, "/"), "..") {
		return "", false
	}
	if c == "" {
		c = "."
	}
	return c, true
}

func fetchRegistry(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("registry %s: %w", redactURL(url), err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch registry %s: %w", redactURL(url), errors.Unwrap(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch registry %s: %s", redactURL(url), resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, registryLimit+1))
	if err != nil {
		return nil, fmt.Errorf("fetch registry %s: %w", redactURL(url), err)
	}
	if len(data) > registryLimit {
		return nil, fmt.Errorf("registry %s: larger than %d MiB", redactURL(url), registryLimit>>20)
	}
	return data, nil
}

func readRegistryFile(name string) ([]byte, error) {
	f, err := openRegular(name)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, registryLimit+1))
	if err != nil {
		return nil, fmt.Errorf("registry %s: %w", name, err)
	}
	if len(data) > registryLimit {
		return nil, fmt.Errorf("registry %s: larger than %d MiB", name, registryLimit>>20)
	}
	return data, nil
}

// Lock is a registry dataset resolved: its name and version, and every
// task's repository, commit and path. A run carries it in its taskset
// reference (Ref); it is the taskset's identity.
type Lock struct {
	Name    string
	Version string
	Tasks   []RegistryTask
}

// Resolve finds name@version in a registry.
func Resolve(ds []Dataset, ref string) (Lock, error) {
	name, version, ok := strings.Cut(ref, "@")
	if !ok || !datasetRef.MatchString(ref) {
		return Lock{}, fmt.Errorf("taskset %q: want a registry dataset as name@version, e.g. terminal-bench@2.0", ref)
	}
	var names, versions []string
	for _, d := range ds {
		if d.Name != name {
			if !slices.Contains(names, d.Name) {
				names = append(names, d.Name)
			}
			continue
		}
		if d.Version == version {
			if len(d.Tasks) == 0 {
				return Lock{}, fmt.Errorf("dataset %s has no tasks in the registry", ref)
			}
			return Lock{Name: name, Version: version, Tasks: slices.Clone(d.Tasks)}, nil
		}
		versions = append(versions, d.Version)
	}
	if len(versions) > 0 {
		sort.Strings(versions)
		return Lock{}, fmt.Errorf("dataset %s has no version %s in the registry; its versions: %s", name, version, strings.Join(versions, ", "))
	}
	sort.Strings(names)
	return Lock{}, fmt.Errorf("no dataset %s in the registry; it has: %s", name, strings.Join(names, ", "))
}

// String is name@version.
func (l Lock) String() string { return l.Name + "@" + l.Version }

// Ref is the taskset reference a run carries: registry:name@version#lock.
// Every worker opens the same tasks from it, with no registry.
func (l Lock) Ref() string {
	raw, _ := json.Marshal(l.Tasks) // strings only: cannot fail
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestCompression)
	w.Write(raw)
	w.Close()
	return registryPrefix + l.String() + "#" + base64.RawURLEncoding.EncodeToString(buf.Bytes())
}

// ParseLock reads a reference made by Lock.Ref; ok is false for a reference
// of another kind.
func ParseLock(ref string) (l Lock, ok bool, err error) {
	rest, ok := strings.CutPrefix(ref, registryPrefix)
	if !ok {
		return Lock{}, false, nil
	}
	nv, enc, _ := strings.Cut(rest, "#")
	name, version, _ := strings.Cut(nv, "@")
	l = Lock{Name: name, Version: version}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err == nil {
		raw, err = io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(raw)), registryLimit))
	}
	if err == nil {
		err = json.Unmarshal(raw, &l.Tasks)
	}
	if err != nil || len(l.Tasks) == 0 {
		return l, true, fmt.Errorf("taskset %s: its resolved tasks are unreadable; resolve %s again with --registry", nv, nv)
	}
	for _, t := range l.Tasks {
		if p := t.problem(true); p != "" {
			return l, true, fmt.Errorf("taskset %s: task %s: %s", nv, t.Name, p)
		}
	}
	return l, true, nil
}

// DisplayName is ref as people read it: a registry taskset's name@version,
// any other reference as it is.
func DisplayName(ref string) string {
	if rest, ok := strings.CutPrefix(ref, registryPrefix); ok {
		nv, _, _ := strings.Cut(rest, "#")
		return nv
	}
	return ref
}

// LockChanges lists how the tasks of now differ from those of was: a task
// at another repository, commit or path, one added, one removed. None
// means the same tasks.
func LockChanges(was, now Lock) []string {
	old := map[string]RegistryTask{}
	for _, t := range was.Tasks {
		old[t.Name] = t
	}
	var changes []string
	seen := map[string]bool{}
	for _, t := range now.Tasks {
		seen[t.Name] = true
		o, ok := old[t.Name]
		switch {
		case !ok:
			changes = append(changes, fmt.Sprintf("task %s added (%s)", t.Name, t.pin()))
		case o.GitCommitID != t.GitCommitID:
			changes = append(changes, fmt.Sprintf("task %s at commit %s, was %s", t.Name, short(t.GitCommitID), short(o.GitCommitID)))
		case o.Digest != t.Digest:
			changes = append(changes, fmt.Sprintf("task %s at digest %s, was %s", t.Name, t.pin(), o.pin()))
		case o.GitURL != t.GitURL || o.Path != t.Path || o.Archive != t.Archive:
			changes = append(changes, fmt.Sprintf("task %s at %s:%s, was %s:%s", t.Name, redactURL(t.GitURL), t.Path, redactURL(o.GitURL), o.Path))
		}
	}
	for _, t := range was.Tasks {
		if !seen[t.Name] {
			changes = append(changes, fmt.Sprintf("task %s removed", t.Name))
		}
	}
	if len(changes) == 0 && !slices.Equal(taskNames(was), taskNames(now)) {
		changes = append(changes, "tasks in another order")
	}
	return changes
}

func taskNames(l Lock) []string {
	var names []string
	for _, t := range l.Tasks {
		names = append(names, t.Name)
	}
	return names
}

// pin is what fixes t, shortened: its commit or its digest.
func (t RegistryTask) pin() string {
	if t.Digest != "" {
		return "sha256:" + short(strings.TrimPrefix(t.Digest, "sha256:"))
	}
	return short(t.GitCommitID)
}

// source is where t comes from, as people read it.
func (t RegistryTask) source() string {
	if t.Archive != "" {
		return fmt.Sprintf("digest %s of %s", t.pin(), redactURL(t.Archive))
	}
	return fmt.Sprintf("commit %s of %s", short(t.GitCommitID), redactURL(t.GitURL))
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// OpenLock fetches the tasks of l into the cache (a repository's commit
// with git, a package's archive over HTTP) and opens them as a Harbor
// taskset, in the registry's order.
func OpenLock(ctx context.Context, l Lock) (*Harbor, error) {
	cache, err := DefaultGitCache()
	if err != nil {
		return nil, err
	}
	h := &Harbor{root: l.String()}
	var bad []string
	for _, t := range l.Tasks {
		var checkout string
		if t.Archive != "" {
			checkout, err = cache.Archive(ctx, t.Archive, t.Digest)
		} else {
			checkout, err = cache.Checkout(ctx, t.GitURL, t.GitCommitID)
		}
		if err != nil {
			return nil, fmt.Errorf("taskset %s: task %s: %w", l, t.Name, err)
		}
		p, _ := cleanTaskPath(t.Path)
		dir := checkout + "/" + p
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			bad = append(bad, fmt.Sprintf("%s: no directory %s at %s", t.Name, t.Path, t.source()))
			continue
		}
		if _, err := h.load(t.Name, dir); err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", t.Name, err))
			continue
		}
		h.names = append(h.names, t.Name)
		h.dirs = append(h.dirs, dir)
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("open taskset %s: %d bad task(s): %s", l, len(bad), strings.Join(bad, "; "))
	}
	return h, nil
}
