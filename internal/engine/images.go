package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// Image is what the engine says of an image.
type Image struct {
	ID     string `json:"Id"`
	Config struct {
		WorkingDir string
		Env        []string
		User       string
		// Entrypoint and Cmd are what a container of the image runs
		// unless told otherwise: the entrypoint, its arguments after.
		Entrypoint []string
		Cmd        []string
	}
}

// InspectImage reads an image by name or ID; a missing one is IsNotFound.
func (c *Client) InspectImage(ctx context.Context, name string) (Image, error) {
	var img Image
	err := c.call(ctx, http.MethodGet, "/images/"+url.PathEscape(name)+"/json", nil, nil, &img)
	return img, err
}

// RemoveImage removes an image, forcibly.
func (c *Client) RemoveImage(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, "/images/"+url.PathEscape(name), url.Values{"force": {"1"}}, nil, nil)
}

// ImageSummary is one image of a listing.
type ImageSummary struct {
	ID       string `json:"Id"`
	RepoTags []string
	Created  int64
	Size     int64
}

// ListImages lists the images whose name matches reference (a name with
// or without its tag, or a pattern such as localhost/evalflow-env/*).
func (c *Client) ListImages(ctx context.Context, reference string) ([]ImageSummary, error) {
	data, err := json.Marshal(map[string][]string{"reference": {reference}})
	if err != nil {
		return nil, err
	}
	var out []ImageSummary
	err = c.call(ctx, http.MethodGet, "/images/json", url.Values{"filters": {string(data)}}, nil, &out)
	return out, err
}

// BuildOptions is one image build.
type BuildOptions struct {
	// Tag names the image built.
	Tag string
	// Dockerfile is the Dockerfile's path in the context; "" is Dockerfile.
	Dockerfile string
	// HostNetwork runs the build's RUN lines on the host's network
	// (Podman's rootful default network needs no more set-up than that).
	HostNetwork bool
	// Labels are set on the image.
	Labels map[string]string
	// Output receives the build's output as it comes; nil discards it.
	Output io.Writer
}

// BuildError is a build that the engine ran and that failed: the
// Dockerfile's fault, not the engine's.
type BuildError struct {
	Message string
}

func (e *BuildError) Error() string { return "image build failed: " + e.Message }

// buildAttempts bounds the tries of a build that the engine's image store
// failed under it.
const buildAttempts = 3

// Build builds an image from context, a tar stream of the build context.
// Podman's build looks through the images already built for one to reuse,
// and fails with "layer not known" when another image is removed while it
// looks (as verifiers' snapshots are, all the time): the engine's fault,
// so the build is tried again from a copy of the context.
func (c *Client) Build(ctx context.Context, context io.Reader, opts BuildOptions) error {
	f, err := os.CreateTemp("", "evalflow-build-context-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := io.Copy(f, context); err != nil {
		return fmt.Errorf("build context: %w", err)
	}
	for attempt := 1; ; attempt++ {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		// The request would close the file it sends; the next try reads it
		// again.
		err := c.buildOnce(ctx, io.NopCloser(f), opts)
		var be *BuildError
		if attempt < buildAttempts && errors.As(err, &be) && strings.Contains(be.Message, "layer not known") && ctx.Err() == nil {
			continue
		}
		return err
	}
}

// buildOnce is one try of Build.
func (c *Client) buildOnce(ctx context.Context, context io.Reader, opts BuildOptions) error {
	q := url.Values{"t": {opts.Tag}, "rm": {"1"}, "forcerm": {"1"}}
	if opts.Dockerfile != "" {
		q.Set("dockerfile", opts.Dockerfile)
	}
	if opts.HostNetwork {
		q.Set("networkmode", "host")
	}
	if len(opts.Labels) > 0 {
		data, err := json.Marshal(opts.Labels)
		if err != nil {
			return err
		}
		q.Set("labels", string(data))
	}
	resp, err := c.request(ctx, http.MethodPost, "/build", q, context, "application/x-tar")
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Status < 500 {
			return &BuildError{Message: e.Message}
		}
		return err
	}
	defer resp.Body.Close()
	return readProgress(resp.Body, opts.Output, func(msg string) error { return &BuildError{Message: msg} })
}

// Pull pulls an image (name[:tag]) from its registry.
func (c *Client) Pull(ctx context.Context, name string, output io.Writer) error {
	ref, tag := name, "latest"
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		ref, tag = name[:i], name[i+1:]
	}
	if i := strings.Index(ref, "@"); i >= 0 {
		ref, tag = name, ""
	}
	q := url.Values{"fromImage": {ref}}
	if tag != "" {
		q.Set("tag", tag)
	}
	resp, err := c.request(ctx, http.MethodPost, "/images/create", q, nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return readProgress(resp.Body, output, func(msg string) error { return fmt.Errorf("pull %s: %s", name, msg) })
}

// readProgress reads the engine's JSON progress messages, writing their
// text to out, until the stream ends or carries an error.
func readProgress(r io.Reader, out io.Writer, fail func(string) error) error {
	if out == nil {
		out = io.Discard
	}
	dec := json.NewDecoder(r)
	for {
		var m struct {
			Stream      string `json:"stream"`
			Status      string `json:"status"`
			Progress    string `json:"progress"`
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("read the engine's progress: %w", err)
		}
		switch {
		case m.Error != "" || m.ErrorDetail.Message != "":
			msg := m.ErrorDetail.Message
			if msg == "" {
				msg = m.Error
			}
			return fail(strings.TrimSpace(msg))
		case m.Stream != "":
			io.WriteString(out, m.Stream)
		case m.Status != "":
			io.WriteString(out, m.Status+" "+m.Progress+"\n")
		}
	}
}

// DiskUsage is what the engine says its images and build cache hold.
type DiskUsage struct {
	LayersSize int64
	BuildCache []struct {
		Size  int64
		InUse bool
	}
}

// BuildCacheSize is the bytes the engine's build cache holds.
func (d DiskUsage) BuildCacheSize() int64 {
	var n int64
	for _, b := range d.BuildCache {
		n += b.Size
	}
	return n
}

// DiskUsage reads the engine's disk usage (GET /system/df).
func (c *Client) DiskUsage(ctx context.Context) (DiskUsage, error) {
	var d DiskUsage
	err := c.call(ctx, http.MethodGet, "/system/df", nil, nil, &d)
	return d, err
}
