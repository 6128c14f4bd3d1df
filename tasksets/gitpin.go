package tasksets

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrNoRef is wrapped by the error for a git_commit_id that is neither a
// full commit id nor HEAD, a branch or a tag of its repository: the
// registry is wrong, and retrying will not help.
var ErrNoRef = errors.New("no such branch or tag")

// PinCommits returns l with every task's git_commit_id a full commit id:
// HEAD (or none, as Harbor reads it), a branch or a tag becomes the commit
// its repository has there now, asked once per repository and name with
// git ls-remote. The lock then holds that commit, so every worker, and a
// resume, opens the tasks as they were when the run started.
func PinCommits(ctx context.Context, l Lock) (Lock, error) {
	pinned := Lock{Name: l.Name, Version: l.Version, Tasks: make([]RegistryTask, len(l.Tasks))}
	seen := map[[2]string]string{}
	for i, t := range l.Tasks {
		if t.Archive == "" && !commitID.MatchString(t.GitCommitID) {
			ref := t.GitCommitID
			if ref == "" {
				ref = "HEAD"
			}
			key := [2]string{t.GitURL, ref}
			commit, ok := seen[key]
			if !ok {
				var err error
				if commit, err = remoteCommit(ctx, t.GitURL, ref); err != nil {
					return Lock{}, fmt.Errorf("taskset %s: task %s: %w", l, t.Name, err)
				}
				seen[key] = commit
			}
			t.GitCommitID = commit
		}
		pinned.Tasks[i] = t
	}
	return pinned, nil
}

// remoteCommit is the commit ref names in the repository at gitURL: HEAD,
// or a tag (peeled to its commit) before a branch, as git itself prefers.
func remoteCommit(ctx context.Context, gitURL, ref string) (string, error) {
	patterns := []string{"HEAD"}
	if ref != "HEAD" {
		patterns = []string{"refs/tags/" + ref, "refs/tags/" + ref + "^{}", "refs/heads/" + ref}
	}
	out, err := git(ctx, "", append([]string{"ls-remote", "--", gitURL}, patterns...)...)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", &FetchError{URL: gitURL, Commit: ref, Git: err.Error()}
	}
	found := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		id, name, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if ok && commitID.MatchString(id) {
			found[name] = id
		}
	}
	for _, name := range []string{"HEAD", "refs/tags/" + ref + "^{}", "refs/tags/" + ref, "refs/heads/" + ref} {
		if id, ok := found[name]; ok {
			return id, nil
		}
	}
	if ref == "HEAD" {
		return "", fmt.Errorf("%s has no HEAD (its default branch has no commit) (%w): give git_commit_id a commit in the registry", redactURL(gitURL), ErrNoRef)
	}
	return "", fmt.Errorf("git_commit_id %q is not a full commit id, and %s has no branch or tag of that name (%w): fix it in the registry", ref, redactURL(gitURL), ErrNoRef)
}
