package container

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// The images the runtime builds from tasks' Dockerfiles
// (localhost/evalflow-env/…) are kept for the next rollouts of their task,
// and would be kept forever: a worker keeps at most KeepImages of them
// (the most recently built), and `starter images prune` removes them on
// demand. An image a container still uses, or built within the last
// pruneGrace (a run may be about to use it), is never removed.

// DefaultKeepImages is how many task images a worker keeps.
const DefaultKeepImages = 100

// pruneGrace keeps the images built this recently.
const pruneGrace = 24 * time.Hour

// ImageRepo is where the images built for tasks are named, each
// ImageRepo/<task>:<hash of its build context>.
const ImageRepo = "localhost/evalflow-env"

// imageRepo is ImageRepo, or a test's own.
func (r *Runtime) imageRepo() string {
	if r.repo != "" {
		return r.repo
	}
	return ImageRepo
}

// TaskImage is an image built for a task.
type TaskImage struct {
	Name    string // repository:tag
	ID      string
	Size    int64
	Created time.Time
	// InUse is set when a container, running or not, uses the image.
	InUse bool
}

// TaskImages lists the images built for tasks, newest first.
func (r *Runtime) TaskImages(ctx context.Context) ([]TaskImage, error) {
	list, err := r.Engine.ListImages(ctx, r.imageRepo()+"/*")
	if err != nil {
		return nil, fmt.Errorf("list task images: %w", err)
	}
	used := map[string]bool{}
	cts, err := r.Engine.ListContainers(ctx)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	for _, c := range cts {
		used[strings.TrimPrefix(c.ImageID, "sha256:")] = true
	}
	var out []TaskImage
	for _, img := range list {
		id := strings.TrimPrefix(img.ID, "sha256:")
		for _, tag := range img.RepoTags {
			if strings.HasPrefix(tag, r.imageRepo()+"/") {
				out = append(out, TaskImage{Name: tag, ID: id, Size: img.Size, Created: time.Unix(img.Created, 0), InUse: used[id]})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out, nil
}

// PruneImages removes the task images beyond the keep most recent, and
// those older than olderThan when it is set (> 0), but never one in use
// or built within pruneGrace unless olderThan is shorter. It returns what
// it removed.
func (r *Runtime) PruneImages(ctx context.Context, keep int, olderThan time.Duration) ([]TaskImage, error) {
	imgs, err := r.TaskImages(ctx)
	if err != nil {
		return nil, err
	}
	grace := pruneGrace
	if olderThan > 0 && olderThan < grace {
		grace = olderThan
	}
	var removed []TaskImage
	for i, img := range imgs {
		age := time.Since(img.Created)
		beyond := keep >= 0 && i >= keep
		old := olderThan > 0 && age > olderThan
		if img.InUse || age < grace || !(beyond || old) {
			continue
		}
		if err := r.Engine.RemoveImage(ctx, img.Name); err != nil {
			return removed, fmt.Errorf("remove image %s: %w", img.Name, err)
		}
		removed = append(removed, img)
	}
	return removed, nil
}
