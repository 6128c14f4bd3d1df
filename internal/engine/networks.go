package engine

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
)

// Network is what the engine says of a network.
type Network struct {
	ID     string `json:"Id"`
	Name   string
	Driver string
	IPAM   struct {
		Config []struct {
			Subnet  string
			Gateway string
		}
	}
}

// InspectNetwork reads a network by name or ID; a missing one is
// IsNotFound.
func (c *Client) InspectNetwork(ctx context.Context, name string) (Network, error) {
	var n Network
	err := c.call(ctx, http.MethodGet, "/networks/"+url.PathEscape(name), nil, nil, &n)
	return n, err
}

// CreateNetwork creates a bridge network of that name, its subnet chosen
// by the engine, with the labels given.
func (c *Client) CreateNetwork(ctx context.Context, name string, labels map[string]string) error {
	in := map[string]any{"Name": name, "Driver": "bridge", "CheckDuplicate": true, "Labels": labels}
	return c.call(ctx, http.MethodPost, "/networks/create", nil, in, nil)
}

// NetworkOptions is a network to create.
type NetworkOptions struct {
	Name   string
	Labels map[string]string
	// Internal networks have no route out: their containers reach one
	// another only.
	Internal bool
}

// CreateNetworkWith creates a bridge network as opts say, its subnet
// chosen by the engine, with name resolution among its containers, and
// returns its ID.
func (c *Client) CreateNetworkWith(ctx context.Context, opts NetworkOptions) (string, error) {
	in := map[string]any{"Name": opts.Name, "Driver": "bridge", "CheckDuplicate": true, "Labels": opts.Labels, "Internal": opts.Internal}
	var out struct {
		ID string `json:"Id"`
	}
	err := c.call(ctx, http.MethodPost, "/networks/create", nil, in, &out)
	return out.ID, err
}

// NetworkSummary is one network of a listing.
type NetworkSummary struct {
	ID     string `json:"Id"`
	Name   string
	Labels map[string]string
}

// ListNetworks lists the networks that carry every label given (key=value,
// or key alone for any value).
func (c *Client) ListNetworks(ctx context.Context, labels ...string) ([]NetworkSummary, error) {
	var q url.Values
	if len(labels) > 0 {
		data, err := json.Marshal(map[string][]string{"label": labels})
		if err != nil {
			return nil, err
		}
		q = url.Values{"filters": {string(data)}}
	}
	var out []NetworkSummary
	if err := c.call(ctx, http.MethodGet, "/networks", q, nil, &out); err != nil {
		return nil, err
	}
	kept := out[:0]
	for _, n := range out {
		if hasLabels(n.Labels, labels) {
			kept = append(kept, n)
		}
	}
	return kept, nil
}

// RemoveNetwork removes a network; one already gone is no error.
func (c *Client) RemoveNetwork(ctx context.Context, name string) error {
	err := c.call(ctx, http.MethodDelete, "/networks/"+url.PathEscape(name), nil, nil, nil)
	if IsNotFound(err) {
		return nil
	}
	return err
}
