package tasksets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// HubKeyEnv names the key sent to a package registry (as Supabase's apikey
// and bearer token) in place of Harbor's publishable one.
const HubKeyEnv = "EVALFLOW_REGISTRY_KEY"

// hubPublicKey is the publishable key Harbor's client sends to its
// registry: a public, anonymous key that reads public packages only.
const hubPublicKey = "sb_publishable_Z-vuQbpvpG-PStjbh4yE0Q_e-d3MTIH"

// hubPage is how many of a dataset's tasks one request lists, as
// Harbor's client pages them.
const hubPage = 1000

// sha256Hex is a content digest, bare.
var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Hub is Harbor's package registry at URL (its service's base URL): a
// dataset is org/name at a tag, a revision or sha256:<digest>, a list of
// task versions each an archive in the registry's storage. Hub reads it
// as Harbor's client does: the REST API's dataset_version_tag,
// dataset_version and dataset_version_task tables, and the storage's
// packages bucket.
type Hub struct {
	URL string
	// Key is sent as the apikey; "" is $EVALFLOW_REGISTRY_KEY, else
	// Harbor's publishable key.
	Key string
	// Client is http.DefaultClient when nil.
	Client *http.Client
}

// hubVersion is a dataset version's row.
type hubVersion struct {
	ID          string `json:"id"`
	ContentHash string `json:"content_hash"`
}

// hubTaskRow is one task of a dataset version.
type hubTaskRow struct {
	TaskVersion struct {
		ContentHash string `json:"content_hash"`
		ArchivePath string `json:"archive_path"`
		Package     struct {
			Name string `json:"name"`
		} `json:"package"`
	} `json:"task_version"`
}

// Resolve finds dataset r and lists its tasks, each pinned by its archive
// and digest.
func (h *Hub) Resolve(ctx context.Context, r DatasetRef) (Lock, error) {
	v, err := h.version(ctx, r)
	if err != nil {
		return Lock{}, err
	}
	l := Lock{Name: r.FullName(), Version: r.Version}
	for offset := 0; ; offset += hubPage {
		var rows []hubTaskRow
		q := url.Values{
			"select":             {"task_version:task_version_id(content_hash,archive_path,package:package_id(name,org:org_id(name)))"},
			"dataset_version_id": {"eq." + v.ID},
			"order":              {"task_version_id"},
			"limit":              {strconv.Itoa(hubPage)},
			"offset":             {strconv.Itoa(offset)},
		}
		if err := h.get(ctx, "dataset_version_task", q, &rows); err != nil {
			return Lock{}, err
		}
		for _, row := range rows {
			tv := row.TaskVersion
			l.Tasks = append(l.Tasks, RegistryTask{Name: tv.Package.Name, Archive: h.archiveURL(tv.ArchivePath), Digest: normalDigest(tv.ContentHash)})
		}
		if len(rows) < hubPage {
			break
		}
	}
	if len(l.Tasks) == 0 {
		return Lock{}, fmt.Errorf("dataset %s has no tasks in the registry %s", r, redactURL(h.URL))
	}
	var bad []string
	for i, t := range l.Tasks {
		if p := t.problem(true); p != "" {
			bad = append(bad, fmt.Sprintf("task %d (%s): %s", i, t.Name, p))
		}
		if slices.IndexFunc(l.Tasks[:i], func(o RegistryTask) bool { return o.Name == t.Name }) >= 0 {
			bad = append(bad, fmt.Sprintf("task name %s appears twice", t.Name))
		}
	}
	if len(bad) > 0 {
		return Lock{}, fmt.Errorf("dataset %s in the registry %s: %s", r, redactURL(h.URL), strings.Join(bad, "; "))
	}
	return l, nil
}

// version finds r's dataset version: by tag, by revision (a number) or by
// content digest (sha256:...), as Harbor's client does.
func (h *Hub) version(ctx context.Context, r DatasetRef) (hubVersion, error) {
	q := url.Values{
		"package.name":     {"eq." + r.Name},
		"package.type":     {"eq.dataset"},
		"package.org.name": {"eq." + r.Org},
		"limit":            {"1"},
	}
	const pkg = "package:package_id!inner(name,type,org:org_id!inner(name))"
	var found []hubVersion
	if digest, ok := strings.CutPrefix(r.Version, "sha256:"); ok || isRevision(r.Version) {
		q.Set("select", "*,"+pkg)
		if ok {
			q.Set("content_hash", "eq."+digest)
		} else {
			q.Set("revision", "eq."+r.Version)
		}
		if err := h.get(ctx, "dataset_version", q, &found); err != nil {
			return hubVersion{}, err
		}
	} else {
		q.Set("select", "dataset_version:dataset_version_id(*),"+pkg)
		q.Set("tag", "eq."+r.Version)
		var rows []struct {
			DatasetVersion hubVersion `json:"dataset_version"`
		}
		if err := h.get(ctx, "dataset_version_tag", q, &rows); err != nil {
			return hubVersion{}, err
		}
		for _, row := range rows {
			found = append(found, row.DatasetVersion)
		}
	}
	if len(found) == 0 || found[0].ID == "" {
		return hubVersion{}, fmt.Errorf("no dataset %s in the registry %s (a version is a tag, a revision number or sha256:<digest>)", r, redactURL(h.URL))
	}
	return found[0], nil
}

func isRevision(v string) bool {
	_, err := strconv.ParseUint(v, 10, 63)
	return err == nil
}

// get reads the REST API's table with query q into out.
func (h *Hub) get(ctx context.Context, table string, q url.Values, out any) error {
	u := strings.TrimSuffix(h.URL, "/") + "/rest/v1/" + table + "?" + q.Encode()
	data, err := hubGet(ctx, h.Client, u, h.Key, registryLimit)
	if err != nil {
		return fmt.Errorf("registry %s: %w", redactURL(h.URL), err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("registry %s: %s: not the rows of Harbor's registry: %w", redactURL(h.URL), table, err)
	}
	return nil
}

// archiveURL is where the storage serves a task version's archive.
func (h *Hub) archiveURL(archivePath string) string {
	return strings.TrimSuffix(h.URL, "/") + "/storage/v1/object/packages/" + strings.TrimPrefix(archivePath, "/")
}

// hubGet GETs u with a registry's key and returns at most limit bytes of
// its body; a status other than 200 is an error naming it.
func hubGet(ctx context.Context, client *http.Client, u, key string, limit int64) ([]byte, error) {
	resp, err := hubDo(ctx, client, u, key)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("larger than %d MiB", limit>>20)
	}
	return data, nil
}

// hubDo GETs u with a registry's key; the response is 200 or an error.
func hubDo(ctx context.Context, client *http.Client, u, key string) (*http.Response, error) {
	if client == nil {
		client = http.DefaultClient
	}
	if key == "" {
		key = os.Getenv(HubKeyEnv)
	}
	if key == "" {
		key = hubPublicKey
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("apikey", key)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		if inner := errors.Unwrap(err); inner != nil {
			return nil, inner
		}
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, &statusError{Status: resp.Status, Code: resp.StatusCode}
	}
	return resp, nil
}

// statusError is an HTTP answer other than 200.
type statusError struct {
	Status string
	Code   int
}

func (e *statusError) Error() string { return e.Status }

// normalDigest is a digest as sha256:<hex>, lower case.
func normalDigest(d string) string {
	return "sha256:" + strings.ToLower(strings.TrimPrefix(strings.TrimSpace(d), "sha256:"))
}

// archiveProblems says what is wrong with a package task: its archive's
// URL and its digest.
func (t RegistryTask) archiveProblems() []string {
	var p []string
	u, err := url.Parse(t.Archive)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		p = append(p, fmt.Sprintf("archive %q must be an http(s) URL", redactURL(t.Archive)))
	case u.User != nil:
		p = append(p, "archive must not hold a user or token")
	case slices.Contains(strings.Split(u.Path, "/"), ".."):
		p = append(p, "archive path must not climb with ..")
	}
	if !sha256Hex.MatchString(strings.TrimPrefix(t.Digest, "sha256:")) || !strings.HasPrefix(t.Digest, "sha256:") {
		p = append(p, fmt.Sprintf("digest %q must be sha256:<64 hex digits>", t.Digest))
	}
	if t.GitURL != "" || t.GitCommitID != "" {
		p = append(p, "a task is a git repository's or an archive, not both")
	}
	if _, ok := cleanTaskPath(t.Path); !ok {
		p = append(p, fmt.Sprintf("path %q must be relative, inside the archive", t.Path))
	}
	return p
}
