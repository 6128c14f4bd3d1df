package engine

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// ContainerConfig is a container to create.
type ContainerConfig struct {
	Name       string            `json:"-"`
	Image      string            `json:"Image"`
	Cmd        []string          `json:"Cmd,omitempty"`
	Entrypoint []string          `json:"Entrypoint"`
	Env        []string          `json:"Env,omitempty"`
	WorkingDir string            `json:"WorkingDir,omitempty"`
	User       string            `json:"User,omitempty"`
	Labels     map[string]string `json:"Labels,omitempty"`
	HostConfig HostConfig        `json:"HostConfig"`
	// Networking says how the container joins the network HostConfig's
	// NetworkMode names: the names it answers to there.
	Networking *NetworkingConfig `json:"NetworkingConfig,omitempty"`
}

// NetworkingConfig is a container's endpoints, by network name.
type NetworkingConfig struct {
	EndpointsConfig map[string]EndpointConfig
}

// EndpointConfig is a container's endpoint on one network.
type EndpointConfig struct {
	// Aliases are names other containers of the network resolve to it.
	Aliases []string `json:",omitempty"`
}

// HostConfig is how a container sits on its host.
type HostConfig struct {
	// Binds are host:container[:ro] mounts.
	Binds []string `json:"Binds,omitempty"`
	// NetworkMode is "none", "host", "bridge", a network's name, or
	// "container:ID" to join another container's network namespace.
	NetworkMode string `json:"NetworkMode,omitempty"`
	// PidMode "container:ID" joins another container's process namespace.
	PidMode string `json:"PidMode,omitempty"`
	// CapAdd are capabilities given beyond the engine's default set.
	CapAdd []string `json:"CapAdd,omitempty"`
	// Memory is the memory limit in bytes; 0 is none. MemorySwap equal to
	// it allows no swap beyond.
	Memory     int64 `json:"Memory,omitempty"`
	MemorySwap int64 `json:"MemorySwap,omitempty"`
	// NanoCPUs is the CPU quota in billionths of a CPU; 0 is none.
	NanoCPUs int64 `json:"NanoCpus,omitempty"`
	// Init runs an init process as PID 1 that reaps orphans.
	Init bool `json:"Init,omitempty"`
	// AutoRemove has the engine remove the container once it ends.
	AutoRemove bool `json:"AutoRemove,omitempty"`
	// ExtraHosts are host:ip lines added to /etc/hosts.
	ExtraHosts []string `json:"ExtraHosts,omitempty"`
}

// CreateContainer creates a container and returns its ID.
func (c *Client) CreateContainer(ctx context.Context, cfg ContainerConfig) (string, error) {
	var q url.Values
	if cfg.Name != "" {
		q = url.Values{"name": {cfg.Name}}
	}
	var out struct {
		ID string `json:"Id"`
	}
	if err := c.call(ctx, http.MethodPost, "/containers/create", q, cfg, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

// StartContainer starts a created container.
func (c *Client) StartContainer(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/start", nil, nil, nil)
}

// Container is what the engine says of a container.
type Container struct {
	ID    string `json:"Id"`
	Name  string
	State struct {
		Status    string
		Running   bool
		ExitCode  int
		OOMKilled bool
		Pid       int
	}
	Config struct {
		Labels     map[string]string
		WorkingDir string
	}
	NetworkSettings struct {
		Networks map[string]struct {
			IPAddress string
			Gateway   string
		}
	}
}

// InspectContainer reads a container; a missing one is IsNotFound.
func (c *Client) InspectContainer(ctx context.Context, id string) (Container, error) {
	var ct Container
	err := c.call(ctx, http.MethodGet, "/containers/"+url.PathEscape(id)+"/json", nil, nil, &ct)
	return ct, err
}

// RemoveContainer removes a container and its anonymous volumes, killing
// it if it runs. A container already gone is no error.
func (c *Client) RemoveContainer(ctx context.Context, id string) error {
	err := c.call(ctx, http.MethodDelete, "/containers/"+url.PathEscape(id), url.Values{"force": {"1"}, "v": {"1"}}, nil, nil)
	if IsNotFound(err) {
		return nil
	}
	return err
}

// Commit snapshots a container's file system (not its mounts) as an image
// named repo:tag and returns the image's ID. With pause, the container's
// processes are frozen while it is read, so the snapshot is of one moment.
func (c *Client) Commit(ctx context.Context, id, repo, tag string, pause bool) (string, error) {
	q := url.Values{"container": {id}, "repo": {repo}, "tag": {tag}, "pause": {strconv.FormatBool(pause)}}
	var out struct {
		ID string `json:"Id"`
	}
	// The body is the image's config, changed: none here.
	if err := c.call(ctx, http.MethodPost, "/commit", q, struct{}{}, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

// PauseContainer freezes every process of a container.
func (c *Client) PauseContainer(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/pause", nil, nil, nil)
}

// UnpauseContainer thaws a paused container.
func (c *Client) UnpauseContainer(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/unpause", nil, nil, nil)
}

// Change is a path of a container's file system that differs from its
// image's.
type Change struct {
	Path string
	// Kind is 0 for modified, 1 for added, 2 for deleted.
	Kind int
}

// Changes lists what a container changed of its image's file system (not
// its mounts).
func (c *Client) Changes(ctx context.Context, id string) ([]Change, error) {
	var out []Change
	err := c.call(ctx, http.MethodGet, "/containers/"+url.PathEscape(id)+"/changes", nil, nil, &out)
	return out, err
}

// ContainerSummary is one container of a listing.
type ContainerSummary struct {
	ID      string `json:"Id"`
	Names   []string
	ImageID string
	State   string
	Labels  map[string]string
}

// ListContainers lists the containers, running or not, that carry every
// label given (key=value, or key alone for any value).
func (c *Client) ListContainers(ctx context.Context, labels ...string) ([]ContainerSummary, error) {
	q := url.Values{"all": {"1"}}
	if len(labels) > 0 {
		data, err := json.Marshal(map[string][]string{"label": labels})
		if err != nil {
			return nil, err
		}
		q.Set("filters", string(data))
	}
	var out []ContainerSummary
	if err := c.call(ctx, http.MethodGet, "/containers/json", q, nil, &out); err != nil {
		return nil, err
	}
	// An engine that ignores a filter is held to it here.
	kept := out[:0]
	for _, ct := range out {
		if hasLabels(ct.Labels, labels) {
			kept = append(kept, ct)
		}
	}
	return kept, nil
}

func hasLabels(have map[string]string, want []string) bool {
	for _, l := range want {
		k, v, withValue := strings.Cut(l, "=")
		got, ok := have[k]
		if !ok || (withValue && got != v) {
			return false
		}
	}
	return true
}
