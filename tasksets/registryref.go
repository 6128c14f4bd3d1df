package tasksets

import (
	"context"
	"fmt"
	"net/url"
	"strings"
)

// DefaultRegistry is the registry a dataset named name@version resolves
// through when no registry is named: Harbor's registry.json, where its
// client finds terminal-bench@2.0 and the other benchmarks it lists. A
// variable so that tests point it at a server of their own.
var DefaultRegistry = "https://raw.githubusercontent.com/laude-institute/harbor/main/registry.json"

// DefaultHub is the package registry a dataset named org/name@ref resolves
// through when no registry is named: Harbor's self-service registry, the
// one its client publishes to and downloads from. A variable so that tests
// point it at a server of their own.
var DefaultHub = "https://ofhuhcpkvzjlejydnvyd.supabase.co"

// DatasetRef is a registry dataset as --taskset names it: name@version
// (Harbor's registry.json), or org/name@ref (Harbor's package registry),
// ref a tag, a revision number or sha256:<digest>.
type DatasetRef struct {
	// Org is "" for a name without one.
	Org     string
	Name    string
	Version string
}

// ParseDatasetRef reads name@version or org/name@ref.
func ParseDatasetRef(ref string) (DatasetRef, error) {
	if !datasetRef.MatchString(ref) {
		return DatasetRef{}, fmt.Errorf("taskset %q: want a registry dataset as name@version or org/name@version (a tag, a revision or sha256:<digest>), e.g. terminal-bench@2.0", ref)
	}
	full, version, _ := strings.Cut(ref, "@")
	org, name, ok := strings.Cut(full, "/")
	if !ok {
		org, name = "", full
	}
	return DatasetRef{Org: org, Name: name, Version: version}, nil
}

// FullName is name, or org/name.
func (r DatasetRef) FullName() string {
	if r.Org == "" {
		return r.Name
	}
	return r.Org + "/" + r.Name
}

// String is the reference as given.
func (r DatasetRef) String() string { return r.FullName() + "@" + r.Version }

// IsHub reports whether src names a package registry (the base URL of
// Harbor's registry service) rather than a registry.json document: an
// http(s) URL whose path does not end in .json.
func IsHub(src string) bool {
	u, err := url.Parse(src)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return !strings.HasSuffix(u.Path, ".json")
}

// ResolveDataset resolves ref through the registry src — a registry.json
// file or URL, or a package registry's URL; "" is the default for the
// kind of name (DefaultHub for org/name, DefaultRegistry for a plain
// name) — and pins what is not pinned yet: a registry.json task at HEAD or
// a branch gets the commit its repository has there now. Every task of the
// result is fixed, so workers and a resume open the same tasks.
func ResolveDataset(ctx context.Context, src, ref string) (Lock, error) {
	r, err := ParseDatasetRef(ref)
	if err != nil {
		return Lock{}, err
	}
	if src == "" {
		src = DefaultRegistry
		if r.Org != "" {
			src = DefaultHub
		}
	}
	if IsHub(src) {
		if r.Org == "" {
			return Lock{}, fmt.Errorf("taskset %s: the package registry %s names datasets org/name@version; give --registry a registry.json for %s", ref, redactURL(src), ref)
		}
		return (&Hub{URL: src}).Resolve(ctx, r)
	}
	ds, err := ReadRegistry(ctx, src)
	if err != nil {
		return Lock{}, err
	}
	l, err := Resolve(ds, ref)
	if err != nil {
		return Lock{}, err
	}
	return PinCommits(ctx, l)
}
