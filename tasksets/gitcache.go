package tasksets

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// GitCache holds checkouts of commits, one directory per repository URL and
// commit (named by their hash), fetched with the git command. A checkout
// is written beside its place and renamed into it, so that concurrent
// fetches of one commit, in one process or several, leave one complete
// copy and readers never see half of one.
type GitCache struct {
	// Dir holds the checkouts.
	Dir string
}

// DefaultGitCache is the cache under the user's cache directory
// ($XDG_CACHE_HOME/evalflow/git, else ~/.cache/evalflow/git), else the
// temporary directory.
func DefaultGitCache() (*GitCache, error) {
	base, err := os.UserCacheDir()
	if err != nil || base == "" {
		base = os.TempDir()
	}
	return &GitCache{Dir: filepath.Join(base, "evalflow", "git")}, nil
}

// fetchTimeout bounds fetching a registry taskset's commits when no
// context does.
const fetchTimeout = 15 * time.Minute

// FetchError is a commit that could not be fetched from a repository that
// could not be reached: a fault of the infrastructure (network, host,
// credentials), never of the agent, and worth retrying.
type FetchError struct {
	URL    string
	Commit string
	// Git is what git said, trimmed (for an archive, what HTTP said).
	Git string
	// Archive is set for a package's archive, fetched over HTTP, whose
	// digest Commit holds.
	Archive bool
}

func (e *FetchError) Error() string {
	if e.Archive {
		return fmt.Sprintf("download %s (%s) failed: %s", redactURL(e.URL), e.Commit, e.Git)
	}
	return fmt.Sprintf("git fetch %s %s failed: %s", redactURL(e.URL), short(e.Commit), e.Git)
}

// ErrNoCommit is wrapped by the error for a commit its repository does not
// have: the registry is wrong, and retrying will not help.
var ErrNoCommit = errors.New("commit not in the repository")

// Checkout returns the directory holding the tree of commit from the
// repository at gitURL, fetching it on first use.
func (c *GitCache) Checkout(ctx context.Context, gitURL, commit string) (string, error) {
	if !commitID.MatchString(commit) {
		return "", fmt.Errorf("git_commit_id %q must be a full commit id (40 hex digits)", commit)
	}
	return c.fill(gitURL+"\n"+commit, func(tmp string) error {
		if err := fetchCommit(ctx, tmp, gitURL, commit); err != nil {
			return err
		}
		// The checkout is content: git's own files are not kept.
		return os.RemoveAll(filepath.Join(tmp, ".git"))
	})
}

// fill returns the cache's directory for key, filling it with fill on
// first use: in a directory beside it, renamed into place once complete.
func (c *GitCache) fill(key string, fill func(tmp string) error) (string, error) {
	sum := sha256.Sum256([]byte(key))
	dir := filepath.Join(c.Dir, hex.EncodeToString(sum[:16]))
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return dir, nil
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return "", fmt.Errorf("git cache: %w", err)
	}
	tmp, err := os.MkdirTemp(c.Dir, ".fetch-*")
	if err != nil {
		return "", fmt.Errorf("git cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := fill(tmp); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("git cache: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another fetch of the same commit put its copy there first.
		if fi, statErr := os.Stat(dir); statErr == nil && fi.IsDir() {
			return dir, nil
		}
		return "", fmt.Errorf("git cache: %w", err)
	}
	return dir, nil
}

// fetchCommit fetches commit alone from gitURL into a new repository in
// dir and checks it out.
func fetchCommit(ctx context.Context, dir, gitURL, commit string) error {
	if _, err := git(ctx, dir, "init", "-q"); err != nil {
		return fmt.Errorf("git init: %w", err)
	}
	target := "FETCH_HEAD"
	if _, err := git(ctx, dir, "fetch", "-q", "--depth=1", "--no-tags", gitURL, commit); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// A server may refuse a commit no branch or tag points at (git's
		// protocol v0 without uploadpack.allowReachableSHA1InWant): fetch
		// its branches and tags, and look for the commit among them.
		if _, allErr := git(ctx, dir, "fetch", "-q", gitURL, "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"); allErr != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &FetchError{URL: gitURL, Commit: commit, Git: err.Error()}
		}
		if _, err := git(ctx, dir, "rev-parse", "-q", "--verify", commit+"^{commit}"); err != nil {
			return fmt.Errorf("%s has no commit %s (%w): fix git_commit_id in the registry", redactURL(gitURL), commit, ErrNoCommit)
		}
		target = commit
	}
	if _, err := git(ctx, dir, "-c", "advice.detachedHead=false", "checkout", "-q", "--detach", target); err != nil {
		return fmt.Errorf("git checkout %s of %s: %w", short(commit), redactURL(gitURL), err)
	}
	head, err := git(ctx, dir, "rev-parse", "HEAD")
	if err != nil {
		return fmt.Errorf("git rev-parse: %w", err)
	}
	if head != commit {
		return fmt.Errorf("%s: fetched %s, want commit %s", redactURL(gitURL), head, commit)
	}
	return nil
}

// git runs git in dir and returns its output; its error is git's message,
// with any credentials of a URL in it removed.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	// Over HTTP, a transfer slower than 1 KiB/s for a minute is given up.
	args = append([]string{"-c", "http.lowSpeedLimit=1024", "-c", "http.lowSpeedTime=60"}, args...)
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	// Never wait on a password prompt; a credential comes from git's own
	// configuration (a credential helper), never from evalflow.
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", errors.New(redactURLs(shortErr(msg)))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// shortErr keeps the first lines of git's message.
func shortErr(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}

// redactURL is u without its user part, which may hold a password or token.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.User == nil {
		return u
	}
	p.User = nil // a token may be the user name
	return p.String()
}

// redactURLs removes credentials of URLs in a message.
func redactURLs(msg string) string {
	words := strings.Fields(msg)
	changed := false
	for i, w := range words {
		if strings.Contains(w, "://") && strings.Contains(w, "@") {
			trimmed := strings.Trim(w, "'\".,:")
			if r := redactURL(trimmed); r != trimmed {
				words[i] = strings.Replace(w, trimmed, r, 1)
				changed = true
			}
		}
	}
	if !changed {
		return msg
	}
	return strings.Join(words, " ")
}
